"""[xclaw] `xclaw.messages`, the documented import path, kept: it re-exports
xclaw/llm/messages.py.
"""

from xclaw.llm.messages import (
    INTERRUPTED_RESULT,
    AssistantMessage,
    ImageBlock,
    Message,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    call_signature,
    is_interrupted_result,
    message_to_json,
)

__all__ = [
    "INTERRUPTED_RESULT",
    "AssistantMessage",
    "ImageBlock",
    "Message",
    "ThinkingBlock",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "call_signature",
    "is_interrupted_result",
    "message_to_json",
]
