// The schedules that send to the session shown, or fork it as their template, as
// GET /api/schedules lists them (docs/schedules.md): a small list above the trace, each with
// when it fires, its next tick, and how often it fired. Shown only when there are some.
import { schedulesApi } from "./api.js";
import { clear, h } from "./dom.js";

function when(s) {
  if (s.kind === "every") {
    const ms = Number(s.spec);
    for (const [unit, size] of [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000]]) {
      if (ms % size === 0) return `every ${ms / size}${unit}`;
    }
    return `every ${ms / 1000}s`;
  }
  if (s.kind === "at") return `once`;
  return `cron ${s.spec}${s.tz === "UTC" ? "" : ` (${s.tz})`}`;
}

function moment(ms) {
  return ms == null ? "–" : new Date(ms).toLocaleString();
}

export class ScheduleList {
  constructor(root) {
    this.root = root;
    this.list = root.querySelector(".schedule-list");
  }

  clearAll() {
    this.root.hidden = true;
    clear(this.list);
  }

  /** Ask the server again for the schedules of `sid`; `isCurrent()` says whether the page
   * still shows that session when the answer comes. */
  async reload(sid, isCurrent) {
    const all = await schedulesApi.list();
    if (isCurrent()) this.show(all.filter((s) => s.sessionId === sid || s.forkOf === sid));
  }

  show(schedules) {
    clear(this.list);
    this.root.hidden = schedules.length === 0;
    for (const s of schedules) {
      const next = s.paused ? "paused" : s.nextFire == null ? "done" : `next ${moment(s.nextFire)}`;
      this.list.append(
        h("li.schedule", { dataset: { id: s.id } },
          h("span.schedule-when.mono", { text: when(s), title: `catch-up: ${s.catchUp}` }),
          h("span.schedule-message", { text: (s.forkOf ? "fork: " : "") + s.message, title: s.message }),
          h("span.schedule-next", { text: next, title: `fired ${s.fired}, skipped ${s.skipped}; by ${s.createdBy || "admin"}` })),
      );
    }
  }
}
