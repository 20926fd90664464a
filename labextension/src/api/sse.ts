/**
 * An incremental Server-Sent Events parser (the text/event-stream format).
 *
 * Pure: feed it decoded text as it arrives, in chunks cut anywhere, and it
 * returns the complete events. `EventSource` cannot send the Jupyter token
 * header, so the service reads streams with fetch and parses them here.
 */

export interface ISSEvent {
  /** `event:` field; `message` when absent. */
  event: string;
  /** `data:` lines joined with newlines. */
  data: string;
  /** `id:` field, or null when the event had none. */
  id: string | null;
}

export class SSEParser {
  /** Feed a chunk of text; returns the events completed by it. */
  feed(chunk: string): ISSEvent[] {
    this._buffer += chunk;
    const out: ISSEvent[] = [];
    let start = 0;
    for (;;) {
      const nl = this._buffer.indexOf('\n', start);
      if (nl < 0) {
        break;
      }
      let line = this._buffer.slice(start, nl);
      start = nl + 1;
      if (line.endsWith('\r')) {
        line = line.slice(0, -1);
      }
      const ev = this._line(line);
      if (ev) {
        out.push(ev);
      }
    }
    this._buffer = this._buffer.slice(start);
    return out;
  }

  /** The id of the last event that carried one (for resuming). */
  get lastId(): string | null {
    return this._lastId;
  }

  private _line(line: string): ISSEvent | null {
    if (line === '') {
      if (!this._hasData && this._event === null) {
        return null;
      }
      const ev: ISSEvent = {
        event: this._event ?? 'message',
        data: this._data.join('\n'),
        id: this._id
      };
      this._event = null;
      this._data = [];
      this._hasData = false;
      this._id = null;
      return ev;
    }
    if (line.startsWith(':')) {
      return null; // comment / keep-alive
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) {
      value = value.slice(1);
    }
    switch (field) {
      case 'event':
        this._event = value;
        break;
      case 'data':
        this._data.push(value);
        this._hasData = true;
        break;
      case 'id':
        this._id = value;
        this._lastId = value;
        break;
      default:
        break; // `retry` and unknown fields are ignored
    }
    return null;
  }

  private _buffer = '';
  private _event: string | null = null;
  private _data: string[] = [];
  private _hasData = false;
  private _id: string | null = null;
  private _lastId: string | null = null;
}
