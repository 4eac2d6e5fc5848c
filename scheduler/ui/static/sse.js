// Server-Sent Events read with fetch(): EventSource cannot send the Authorization
// header, and the token must not travel in a URL (it would land in access logs).

import { apiBase } from "./api.js";
import { token } from "./session.js";

/** The SSE wire format (the WHATWG rules): feed text as it comes, get whole events. */
export class SseParser {
  constructor() {
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.event = { event: "message", data: [], id: null };
  }

  /** The events completed by this chunk of text, in order. */
  feed(text) {
    this.buffer += text;
    const events = [];
    // A line ends with CRLF, LF or CR; a CR at the very end may be half of a CRLF.
    const lines = this.buffer.split(/\r\n|\n|\r(?!$)/);
    this.buffer = lines.pop();
    for (const line of lines) {
      const done = this.line(line);
      if (done) events.push(done);
    }
    return events;
  }

  line(line) {
    if (line === "") {
      const { event, data, id } = this.event;
      this.reset();
      return data.length ? { event, data: data.join("\n"), id } : null;
    }
    if (line.startsWith(":")) return null; // a comment: the server's keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.event.data.push(value);
    else if (field === "event") this.event.event = value;
    else if (field === "id") this.event.id = value;
    return null;
  }
}

/**
 * Read GET <api>/events... until it ends, the signal aborts, or it fails (throws).
 * onOpen runs once the server has answered (every later event will arrive); onEvent
 * gets each event's parsed JSON.
 */
export async function readEvents(path, { signal, onOpen, onEvent }) {
  const response = await fetch(apiBase() + path, {
    signal, headers: { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" },
  });
  const type = response.headers.get("content-type") || "";
  if (!response.ok || !type.startsWith("text/event-stream")) {
    throw new Error(`no event stream (HTTP ${response.status})`);
  }
  onOpen();
  const parser = new SseParser();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    for (const event of parser.feed(value)) {
      try {
        onEvent(JSON.parse(event.data));
      } catch {
        // not JSON: not one of ours; the next re-read of the run shows the truth anyway
      }
    }
  }
}
