/**
 * The data sources own the service calls: each test hands one a fake of the service (a plain
 * object with the methods it calls, our own boundary) and checks the requests it makes and the
 * signals it emits.
 */

import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { IExplain, IQueue, IRunDetail, IStatusEvent, ISweepChange } from '../src/api/types';
import { OneAtATime } from '../src/models/coalesce';
import { InsightsSource } from '../src/models/insightssource';
import { QUEUES_COALESCE_MS, QueuesSource } from '../src/models/queuessource';
import { RunDetailService, RunDetailSource } from '../src/models/rundetailsource';
import { SessionLease } from '../src/models/sessionlease';
import { SessionService, SessionSource } from '../src/models/sessionsource';

const queue = (name: string, paused = false): IQueue =>
  ({ name, priority: 10, concurrency: 2, quota: { gpu: 2 }, max_per_user: 1, ordering: 'fifo', paused, usage: { runs: 0, gpu: 0 }, pending: 0, head_wait: null }) as IQueue;

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

function fakeQueues(answers: IQueue[][]) {
  const calls: string[] = [];
  let n = 0;
  return {
    calls,
    service: {
      queues: async () => {
        calls.push('queues');
        const a = answers[Math.min(n++, answers.length - 1)];
        if (!a) {
          throw new Error('unreachable');
        }
        return a;
      },
      pauseQueue: async (name: string) => (calls.push(`pause ${name}`), { queue: queue(name, true) }),
      resumeQueue: async (name: string) => (calls.push(`resume ${name}`), { queue: queue(name, false) })
    }
  };
}

test('queues: a burst of schedule() costs one request, then the list is signalled', async () => {
  const fake = fakeQueues([[queue('a'), queue('b')]]);
  const source = new QueuesSource(fake.service);
  const seen: string[][] = [];
  source.changed.connect((_, qs) => seen.push(qs.map(q => q.name)));
  for (let i = 0; i < 5; i++) {
    source.schedule();
  }
  assert.deepEqual(fake.calls, []); // nothing before the burst is over
  await sleep(QUEUES_COALESCE_MS + 50);
  assert.deepEqual(fake.calls, ['queues']);
  assert.deepEqual(seen, [['a', 'b']]);
  assert.deepEqual(source.queues.map(q => q.name), ['a', 'b']);
  source.dispose();
});

test('queues: pause and resume call the service and replace that queue only', async () => {
  const fake = fakeQueues([[queue('a'), queue('b', true)]]);
  const source = new QueuesSource(fake.service);
  await source.refresh();
  let changes = 0;
  source.changed.connect(() => changes++);
  await source.toggle(source.queues[0]);
  assert.deepEqual(fake.calls, ['queues', 'pause a']);
  assert.deepEqual(source.queues.map(q => [q.name, q.paused]), [['a', true], ['b', true]]);
  await source.toggle(source.queues[1]);
  assert.deepEqual(fake.calls.slice(2), ['resume b']);
  assert.deepEqual(source.queues.map(q => [q.name, q.paused]), [['a', true], ['b', false]]);
  assert.equal(changes, 2);
  source.dispose();
});

test('queues: a failed read is signalled and the list stays', async () => {
  const fake = fakeQueues([[queue('a')]]);
  const source = new QueuesSource({
    ...fake.service,
    queues: async () => {
      throw new Error('down');
    }
  });
  const errors: string[] = [];
  source.failed.connect((_, e) => errors.push((e as Error).message));
  await source.refresh();
  assert.deepEqual(errors, ['down']);
  assert.deepEqual(source.queues, []);
  source.dispose();
});

const detail = (id: string, status: string, extra: Partial<IRunDetail> = {}): IRunDetail => ({ id, status, ...extra }) as unknown as IRunDetail;

function fakeDetail(): { calls: string[]; service: RunDetailService } {
  const calls: string[] = [];
  const service = {
    getRun: async (id: string) => (calls.push(`get ${id}`), detail(id, 'running')),
    explain: async (id: string) => (calls.push(`explain ${id}`), { run_id: id } as unknown as IExplain),
    outputs: async (id: string) => (calls.push(`outputs ${id}`), []),
    outputBlob: async (id: string, path: string) => (calls.push(`blob ${id} ${path}`), new Blob(['x'])),
    stop: async (id: string) => (calls.push(`stop ${id}`), detail(id, 'stopping')),
    logs: (id: string) => (calls.push(`logs ${id}`), { close: () => calls.push(`close ${id}`) }),
    logBlob: async (id: string) => (calls.push(`logBlob ${id}`), new Blob(['log'])),
    metrics: async (id: string) => (calls.push(`metrics ${id}`), { metrics: {} }),
    sweepPoints: async (id: string) => (calls.push(`points ${id}`), { objective: null, best: null, children: [] }),
    updateSweep: async (id: string, change: ISweepChange) => (calls.push(`patch ${id} ${JSON.stringify(change)}`), detail(id, 'running', { paused: true } as Partial<IRunDetail>))
  };
  return { calls, service: service as unknown as RunDetailService };
}

test('run detail: every call is for its run; reads, stops and sweep changes signal the record', async () => {
  const fake = fakeDetail();
  const source = new RunDetailSource(fake.service, 'r-7');
  const records: string[] = [];
  source.runChanged.connect((_, r) => records.push(`${r.id} ${r.status}`));
  assert.equal(source.run === null, true); // nothing read yet
  await source.load();
  await source.explain();
  await source.outputs();
  await source.outputBlob('out/model.pt');
  await source.metrics();
  const stream = source.logs({ onLines: () => undefined });
  stream.close();
  await source.logBlob();
  await source.sweepPoints();
  await source.updateSweep({ paused: true });
  await source.stop();
  assert.deepEqual(fake.calls, [
    'get r-7',
    'explain r-7',
    'outputs r-7',
    'blob r-7 out/model.pt',
    'metrics r-7',
    'logs r-7',
    'close r-7',
    'logBlob r-7',
    'points r-7',
    'patch r-7 {"paused":true}',
    'stop r-7'
  ]);
  // only the answers that are the record signal it
  assert.deepEqual(records, ['r-7 running', 'r-7 running', 'r-7 stopping']);
  assert.equal(source.run?.status, 'stopping');
  source.dispose();
});

test('insights: only the latest request answers; an older one answers null, even when it fails', async () => {
  const pending: Array<{ resolve: (v: Record<string, any>) => void; reject: (e: Error) => void }> = [];
  const source = new InsightsSource({
    queues: async () => [],
    projects: async () => [],
    insights: () => new Promise((resolve, reject) => pending.push({ resolve, reject })),
    whatif: async body => body
  });
  const first = source.insights({ queue: 'a' });
  const second = source.insights({ queue: 'b' });
  pending[1].resolve({ n: 2 });
  pending[0].reject(new Error('late'));
  assert.equal(await first, null);
  assert.deepEqual(await second, { n: 2 });
  const third = source.insights({ queue: 'c' });
  pending[2].reject(new Error('down'));
  await assert.rejects(third, /down/);
});

test('one at a time: asks while a request is out cost one more request after it, not one each', async () => {
  const out: Array<() => void> = [];
  let sent = 0;
  let nothing = false;
  const reads = new OneAtATime(() => (nothing ? null : (sent++, new Promise<void>(resolve => out.push(resolve)))));
  reads.request();
  reads.request();
  reads.request();
  assert.equal(sent, 1);
  assert.equal(reads.busy, true);
  out[0]();
  await sleep(0);
  assert.equal(sent, 2); // the asks meanwhile: one more read, after the first
  out[1]();
  await sleep(0);
  assert.equal(sent, 2);
  assert.equal(reads.busy, false);
  nothing = true; // nothing to read: no request, nothing held
  reads.request();
  assert.equal(reads.busy, false);
  // a failed read does not stop the next
  nothing = false;
  const failing = new OneAtATime(() => (sent++, Promise.reject(new Error('down'))));
  failing.request();
  failing.request();
  await sleep(0);
  await sleep(0);
  assert.equal(sent, 4);
});

test('session lease: an end an event showed outlives a slower re-read; why it waits is read while it waits', async () => {
  const rec = (phase: string, status: string) =>
    ({ id: 's1', project: 'p', queue: 'interactive', status, phase, reason: status, message: status, devices: [] }) as unknown as IRunDetail;
  let answer = rec('execution', 'running');
  const calls: string[] = [];
  const service = {
    getRun: async (id: string) => (calls.push(`get ${id}`), answer),
    explain: async (id: string) => (calls.push(`explain ${id}`), { run_id: id } as unknown as IExplain)
  } as unknown as SessionService;
  const reads: string[] = [];
  let explained = 0;
  const lease = new SessionLease(new SessionSource(service), { read: r => reads.push(r.status), explained: () => explained++ });
  lease.follow(rec('dispatch', 'queued'));
  lease.refreshExplain();
  await sleep(10);
  assert.deepEqual(calls, ['explain s1']);
  assert.equal(explained, 1);
  assert.ok(lease.explain);
  lease.showEvent({ run_id: 's1', status: 'stopped', phase: 'end', reason: 'Stopped', message: 'stopped' } as unknown as IStatusEvent);
  assert.equal(lease.run?.status, 'stopped');
  lease.refresh(); // the read answers the record from before the end
  await sleep(10);
  assert.deepEqual(calls, ['explain s1', 'get s1']);
  assert.deepEqual(reads, ['running']);
  assert.equal(lease.run?.status, 'stopped'); // kept from the event
  assert.equal(lease.run?.phase, 'end');
  answer = rec('end', 'stopped');
  lease.refreshExplain(); // not waiting: nothing to read
  await sleep(10);
  assert.deepEqual(calls, ['explain s1', 'get s1']);
});
