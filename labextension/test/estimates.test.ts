/**
 * Start estimates as the sidebar shows them: the service's words chosen and labelled, never a
 * duration of the sidebar's own; `eta` events kept in the runs list; a waiting lease re-read; the
 * first-estimate notice; the submit preview's estimate and its sooner ways.
 */

import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { IEtaEvent, IPreview, IRun, IStartEstimate, IStatusEvent } from '../src/api/types';
import { RunsModel } from '../src/models/runsmodel';
import { etaActions } from '../src/models/sessionmodel';
import {
  DEFAULT_NOTIFY,
  estimateLine,
  estimateNotice,
  estimateView,
  etaChangeOf,
  formChange,
  previewEstimate,
  runRowView
} from '../src/models/viewmodel';
import { PHASE } from './wire';

function eta(text: string, computedAt = 1000, p50 = 600): IStartEstimate {
  // p50_at is deliberately inconsistent with `text`: what is shown must be the service's words
  return { p50_at: 1, p90_at: 2, p50_seconds: p50, p90_seconds: p50, basis: 'admission run forward once', computed_at: computedAt, text };
}

function run(id: string, over: Partial<IRun> = {}): IRun {
  return {
    id,
    seq: 1,
    project: 'team-a',
    user: 'alice',
    name: id,
    kind: 'job',
    queue: 'one',
    status: 'queued',
    phase: 'dispatch',
    reason: 'QueueConcurrency',
    message: '1/1 runs dispatched in queue one',
    resources: { gpu: 0 },
    presets: [],
    devices: [],
    exit_code: null,
    clocks: { queue_wait_seconds: 1, start_wait_seconds: null, run_seconds: null, ticking: 'queue_wait_seconds' },
    created_at: 100,
    queued_at: 100,
    dispatched_at: null,
    started_at: null,
    finished_at: null,
    updated_at: 100,
    ...over
  };
}

function etaEvent(...runs: Array<[string, IStartEstimate | null, string | null]>): IEtaEvent {
  return { runs: runs.map(([run_id, e, unknown]) => ({ run_id, project: 'team-a', eta: e, eta_unknown: unknown })) };
}

test("an estimate is the service's text and basis; an unknown one says why; none says nothing", () => {
  const known = estimateView({ eta: eta('starts in ~10 min (p90 10 min)') });
  assert.deepEqual(known, { state: 'known', text: 'starts in ~10 min (p90 10 min)', why: 'admission run forward once', computedAt: 1000 });
  const unknown = { eta: null, eta_unknown: 'r-abc has no time limit and no history' };
  assert.deepEqual(estimateView(unknown), { state: 'unknown', text: 'start unknown', why: 'r-abc has no time limit and no history', computedAt: null });
  assert.equal(estimateLine(unknown), 'start unknown: r-abc has no time limit and no history');
  assert.equal(estimateView({}).state, 'none');
  assert.equal(estimateLine(null), '');
});

test("a waiting row shows its estimate (the reason of an unknown one on hover), and it is in the row's title", () => {
  const v = runRowView(run('r-1', { eta: eta('starts in ~20 min (p90 20 min)') }), 200);
  assert.equal(v.eta, 'starts in ~20 min (p90 20 min)');
  assert.equal(v.etaWhy, 'admission run forward once');
  assert.match(v.title, / · starts in ~20 min \(p90 20 min\)$/);
  const u = runRowView(run('r-2', { eta: null, eta_unknown: 'r-1 has no time limit and no history' }), 200);
  assert.equal(u.eta, 'start unknown');
  assert.equal(u.etaWhy, 'r-1 has no time limit and no history');
  assert.equal(runRowView(run('r-3', { status: 'running', phase: 'run' }), 200).eta, '');
});

test('eta events change the rows they name, in place; an estimate older than the one held is not taken', () => {
  const m = new RunsModel();
  m.addPage({ runs: [run('r-2', { seq: 2, eta: eta('starts in ~20 min (p90 20 min)', 1000) }), run('r-1')], next_before: null }, true);
  let changes = 0;
  m.onChange(() => (changes += 1));
  assert.equal(m.applyEta(etaEvent(['r-9', eta('starts now'), null])), false); // not listed: nothing to do
  assert.equal(changes, 0);
  assert.equal(m.applyEta(etaEvent(['r-2', eta('starts in ~10 min (p90 10 min)', 1100), null], ['r-1', null, 'r-x has no time limit and no history'])), true);
  assert.equal(changes, 1); // one change for the whole event
  assert.equal(m.get('r-2')?.eta?.text, 'starts in ~10 min (p90 10 min)');
  assert.equal(m.get('r-1')?.eta_unknown, 'r-x has no time limit and no history');
  assert.equal(m.applyEta(etaEvent(['r-2', eta('starts in ~20 min (p90 20 min)', 1050), null])), false);
  assert.equal(m.get('r-2')?.eta?.text, 'starts in ~10 min (p90 10 min)');
});

test('a run that starts drops its estimate at once (the re-read record has none either)', () => {
  const m = new RunsModel();
  m.addPage({ runs: [run('r-1', { eta: eta('starts in ~10 min (p90 10 min)') })], next_before: null }, true);
  const dispatched: IStatusEvent = {
    id: 1,
    run_id: 'r-1',
    project: 'team-a',
    queue: 'one',
    user: 'alice',
    name: 'r-1',
    status: 'dispatched',
    phase: PHASE.dispatched,
    reason: 'Admitted',
    message: 'admitted',
    at: 200
  };
  m.applyEvent(dispatched); // on Kubernetes a dispatched run may still say why its start is unknown: kept until re-read
  assert.equal(m.get('r-1')?.eta?.text, 'starts in ~10 min (p90 10 min)');
  m.applyEvent({ ...dispatched, status: 'running', phase: PHASE.running, at: 201 });
  assert.equal(m.get('r-1')?.eta, null);
  assert.equal(runRowView(m.get('r-1')!, 300).eta, '');
});

test('an eta event re-reads why a waiting lease waits when it names the lease, and only then', () => {
  const ev = etaEvent(['r-s', eta('starts in ~30 min (p90 30 min)'), null]);
  assert.deepEqual(etaActions(ev, 'r-s', { phase: 'dispatch' }), ['explain']);
  assert.deepEqual(etaActions(ev, 'r-other', { phase: 'dispatch' }), []);
  assert.deepEqual(etaActions(ev, 'r-s', { phase: 'run' }), []);
  assert.equal(etaChangeOf(ev, 'r-s')?.eta?.text, 'starts in ~30 min (p90 30 min)');
  assert.equal(etaChangeOf(ev, 'r-other'), undefined);
});

test("the first-estimate notice names the run, its queue and the service's words; none for an unknown start or when off", () => {
  const w = { id: 'r-1', name: 'second', queue: 'one' };
  const [change] = etaEvent(['r-1', eta('starts in ~10 min (p90 10 min)'), null]).runs;
  assert.deepEqual(estimateNotice(w, change, DEFAULT_NOTIFY), {
    kind: 'estimate',
    type: 'info',
    message: 'Run second waits in one: starts in ~10 min (p90 10 min)'
  });
  assert.equal(estimateNotice({ ...w, name: null }, change, DEFAULT_NOTIFY)?.message, 'Run r-1 waits in one: starts in ~10 min (p90 10 min)');
  const [unknown] = etaEvent(['r-1', null, 'r-0 has no time limit and no history']).runs;
  assert.equal(estimateNotice(w, unknown, DEFAULT_NOTIFY), null);
  assert.equal(estimateNotice(w, change, { ...DEFAULT_NOTIFY, estimate: false }), null);
});

test('the preview says when the run would start and lists the sooner ways with their estimates', () => {
  const allowed = { allowed: true, violations: [], rules: [], alternatives: [] };
  const p: Pick<IPreview, 'verdict' | 'eta' | 'eta_unknown' | 'alternatives'> = {
    verdict: allowed,
    eta: eta('starts in ~12 min (p90 40 min)'),
    eta_unknown: null,
    alternatives: [
      { changes: { queue: 'spare', resources: { gpu: 1 } }, hint: 'use queue spare and ask for 1 GPU instead of 2', eta: eta('starts now'), eta_unknown: null },
      { changes: { placement: { gpu_type: 'a100' } }, hint: 'use flavor a100 instead of h100', eta: null, eta_unknown: 'r-7 has no time limit and no history' }
    ]
  };
  const e = previewEstimate(p);
  assert.equal(e?.line, 'would start: starts in ~12 min (p90 40 min)');
  assert.deepEqual(
    e?.sooner.map(a => [a.hint, a.eta, a.form]),
    [
      ['use queue spare and ask for 1 GPU instead of 2', 'starts now', { queue: 'spare', gpu: '1' }],
      ['use flavor a100 instead of h100', 'start unknown: r-7 has no time limit and no history', null]
    ]
  );
  assert.equal(previewEstimate({ ...p, eta: null, eta_unknown: 'queue one is paused', alternatives: [] })?.line, 'would start: unknown (queue one is paused)');
  assert.equal(previewEstimate({ ...p, verdict: { ...allowed, allowed: false } }), null); // refused: it would not start at all
  assert.equal(previewEstimate({ ...p, eta: null, eta_unknown: null }), null); // a sweep: its children wait each on their own
});

test('a sooner way the form can make sets its fields; one it cannot (placement, an odd value) sets none', () => {
  assert.deepEqual(formChange({ queue: 'spare' }), { queue: 'spare' });
  assert.deepEqual(formChange({ resources: { gpu: 1, memory: '8Gi' } }), { gpu: '1', memory: '8Gi' });
  assert.equal(formChange({ queue: 'spare', placement: { gpu_type: 'a100' } }), null);
  assert.equal(formChange({ resources: { nvidia_com_mig: 1 } }), null);
  assert.equal(formChange({ resources: { gpu: null } }), null);
});
