// Keeping a page current: re-read on every event of the live stream (GET /events),
// and poll every second whenever the stream cannot be had (not deployed, or lost).

import { readEvents } from "./sse.js";

export const POLL_MS = 1000;
const STREAM_RETRY_MS = 15000; // while polling, try the stream again this often

// A re-read starts at least this long after the one before: a busy run sends events
// without pause, and the page re-read the run after each, back to back (a 61-task run
// of 2.5 s: 21-25 reads, 7-10 spaced). A wide run's page draws slower than that anyway.
export const MIN_GAP_MS = 200;

/**
 * refresh() at most once at a time; calls while it runs make one more run after it,
 * spaced as above (the last call is always followed by a run that starts after it).
 */
export function coalesced(refresh, { minGapMs = MIN_GAP_MS } = {}) {
  let running = null;
  let again = false;
  const kick = async () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        const began = performance.now();
        try {
          await refresh();
        } catch {
          // the page shows its own errors; the next event or poll tries again
        }
        const wait = began + minGapMs - performance.now();
        if (again && wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      } while (again);
    })();
    await running;
    running = null;
    return undefined;
  };
  return kick;
}

const pause = (ms, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
});

/**
 * Call refresh() on every event that the stream at `path` delivers, until the signal
 * aborts or, once the stream has ended, done() says nothing more will happen (a run's
 * stream ends after its final event); showMode("live" | "polling") says which way the
 * page is kept current.
 */
export function watch(path, refresh, { signal, showMode = () => {}, done = () => false }) {
  const kick = coalesced(refresh);
  (async () => {
    while (!signal.aborted) {
      try {
        await readEvents(path, {
          signal,
          onOpen: () => { showMode("live"); kick(); }, // catch up on what came before
          onEvent: () => kick(),
        });
        await kick();
        if (done()) return;
      } catch {
        // no stream (404 before the endpoint existed, a proxy, a restart): poll
      }
      if (signal.aborted || done()) return;
      showMode("polling");
      for (let waited = 0; waited < STREAM_RETRY_MS && !signal.aborted; waited += POLL_MS) {
        await pause(POLL_MS, signal);
        if (!signal.aborted) await kick();
      }
    }
  })();
}
