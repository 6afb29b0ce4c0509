// The processes a session's commands left running between steps (a dev server, a database),
// as GET /api/sessions/{id}/processes lists them (docs/containers.md): a small list above the
// trace, each with the step that started it. Only a session's container keeps processes; the
// list is shown only when it holds some (an empty one's reason is for /ps and the API).
import { sessionsApi } from "./api.js";
import { clear, h } from "./dom.js";

export class ProcessList {
  constructor(root) {
    this.root = root;
    this.list = root.querySelector(".process-list");
    this.where = root.querySelector(".process-where");
    this.shownFor = null;
  }

  clearAll() {
    this.shownFor = null;
    this.root.hidden = true;
    clear(this.list);
  }

  /** Ask the server again for `sid`'s list; `isCurrent()` says whether the page still shows
   * that session when the answer comes. */
  async reload(sid, isCurrent) {
    const listing = await sessionsApi.processes(sid);
    if (isCurrent()) this.show(listing);
  }

  show(listing) {
    const procs = listing.processes || [];
    this.shownFor = listing.sessionId;
    clear(this.list);
    this.root.hidden = procs.length === 0;
    this.where.textContent = procs.length ? `${procs.length} in container ${listing.container}` : "";
    this.where.title = listing.container || "";
    for (const p of procs) {
      this.list.append(
        h("li.process", { dataset: { pid: String(p.pid) } },
          h("span.process-step.mono", { text: p.stepId || "?", title: "the step whose command started it" }),
          h("span.process-cmd.mono", { text: p.command, title: p.command }),
          h("span.process-pid.mono", { text: `pid ${p.pid}`, title: `lease epoch ${p.epoch ?? "?"}` })),
      );
    }
  }
}
