/**
 * One request at a time: asked again while one is out, it is sent once more after it (not once
 * per ask), so a burst of events costs at most two reads and the last read is after the last
 * event. The data sources' re-reads use it (a notebook's session and its explain, my sessions).
 */
export class OneAtATime {
  /** `call` sends the request, or answers null when there is nothing to read now. */
  constructor(private _call: () => Promise<unknown> | null) {}

  /** Whether a request is out. */
  get busy(): boolean {
    return this._busy;
  }

  request(): void {
    if (this._busy) {
      this._again = true;
      return;
    }
    const sent = this._call();
    if (sent === null) {
      return;
    }
    this._busy = true;
    sent
      .catch(() => undefined) // the caller handles its errors; a failed read does not stop the next
      .finally(() => {
        this._busy = false;
        if (this._again) {
          this._again = false;
          this.request();
        }
      });
  }

  private _busy = false;
  private _again = false;
}
