/**
 * When each record arrived from the service (client seconds), so its ticking clock goes on
 * from there. The service marks what it reads; models/lifecycle.ts re-exports both for the views.
 */

const READ_AT = new WeakMap<object, number>();

/** A record came from the service now (or at `at`): its clocks are as of then. */
export function markRead<T extends object>(record: T, at: number = Date.now() / 1000): T {
  READ_AT.set(record, at);
  return record;
}

/** Seconds since the record was read (0 when not known: its clocks stand until it is). */
export function readAgo(record: object, now: number = Date.now() / 1000): number {
  const at = READ_AT.get(record);
  return at === undefined ? 0 : Math.max(0, now - at);
}
