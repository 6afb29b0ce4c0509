"""[runtime] An agent's messages rebuilt from its steps, as this worker runs them: with its
toolbox's tool kinds (which interrupted calls run again) and the bytes of the images tools
returned."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from xclaw.errors import MissingBlobs
from xclaw.recorder.history import History, build_history, with_image_bytes
from xclaw.runtime.wiring import Toolbox
from xclaw.store.base import SnapshotStore
from xclaw.store.steps.model import Step


@dataclass(frozen=True)
class Rebuilder:
    store: SnapshotStore
    toolbox: Toolbox

    def __call__(
        self, steps: Iterable[Step], *, new_input: bool = False, rerun: Collection[str] = ()
    ) -> History:
        """Blocking when a step holds images (their bytes come from the blob store).
        `rerun`: interrupted calls a settle check found not done (build_history)."""
        steps = list(steps)
        sid = steps[0].session_id if steps else None  # (its client's tools count too)
        hist = build_history(
            steps,
            read_only=lambda name: self.toolbox.is_retry_safe(name, sid),
            resumable=lambda name: self.toolbox.is_resumable(name, sid),
            new_input=new_input,
            rerun=rerun,
        )
        hist.messages = with_image_bytes(hist.messages, self._image_blobs)
        return hist

    def _image_blobs(self, hashes: list[str]) -> dict[str, bytes]:
        """The blobs that are still stored (a missing one becomes a note, not a failure)."""
        try:
            return self.store.get_blobs(hashes)
        except MissingBlobs as e:
            rest = [h for h in hashes if h not in e.hashes]
            return self.store.get_blobs(rest) if rest else {}
