"""[acp] An ACP prompt (content blocks) as the text of an xclaw message.

xclaw's messages are text: text blocks are joined; embedded context (a file the editor
attached) is given inline, fenced with its URI; a resource link is named. Images and audio
are refused with a clear error rather than dropped (the prompt capabilities say so:
`image: false`, `audio: false`, `embeddedContext: true`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp import RequestError
from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

# The largest prompt taken, in characters: a message is one step of the record, sent to the
# model with every later call.
MAX_PROMPT_CHARS = 1_000_000


def prompt_text(blocks: Sequence[Any]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, EmbeddedResourceContentBlock):
            res = block.resource
            if isinstance(res, TextResourceContents):
                parts.append(f"<context uri={res.uri!r}>\n{res.text}\n</context>")
            elif isinstance(res, BlobResourceContents):
                parts.append(
                    f"[attached binary {res.uri} ({res.mime_type or 'unknown type'}), "
                    "not included: xclaw's messages are text]"
                )
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.name}: {block.uri}]")
        elif isinstance(block, ImageContentBlock | AudioContentBlock):
            kind = "an image" if isinstance(block, ImageContentBlock) else "audio"
            raise RequestError.invalid_params(
                {"details": f"this prompt holds {kind}: xclaw's messages are text only"}
            )
    text = "\n\n".join(p for p in parts if p)
    if not text.strip():
        raise RequestError.invalid_params({"details": "the prompt is empty"})
    if len(text) > MAX_PROMPT_CHARS:
        raise RequestError.invalid_params(
            {"details": f"the prompt has {len(text)} characters; at most {MAX_PROMPT_CHARS}"}
        )
    return text
