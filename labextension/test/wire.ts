/**
 * Fixtures only: the `phase` the service sends with each status (jupyter_gpuplat/core/status.py
 * `phase_of` owns it), so tests can build records and events as the wire carries them.
 */

import type { Phase } from '../src/models/lifecycle';

export const PHASE: Record<string, Phase> = {
  created: 'dispatch',
  queued: 'dispatch',
  dispatched: 'execution',
  starting: 'execution',
  running: 'run',
  stopping: 'run',
  succeeded: 'end',
  failed: 'end',
  stopped: 'end'
};
