/**
 * Queues: per queue, GPUs used/quota, runs dispatched/concurrency, its rules (ordering,
 * max_per_user), the pending runs in order with their positions (others' projects
 * counted, not named), what the head waits for, paused state; Pause or Resume where the
 * queue's `actions` offer it (platform admins).
 */

import { Widget } from '@lumino/widgets';

import { errorBox, h } from '../dom';
import type { IQueue } from '../../api/types';
import type { QueuesSource } from '../../models/queuessource';
import { hiddenPendingText, pendingCount, pendingRunText, pendingRuns, queueRulesText, queueView } from '../../models/viewmodel';

export interface IQueuesOptions {
  source: QueuesSource;
  /** The longest queue wait (the service's clock, ticking) among the waiting runs we list in this queue. */
  longestWait: (queue: string) => number | null;
  /** Open a pending run (its row in the queue). */
  onOpen?: (id: string) => void;
  /** Rendered anew (the panel's clock may have to start). */
  onRendered?: () => void;
}

export class QueuesView extends Widget {
  constructor(private _opts: IQueuesOptions) {
    super();
    this.addClass('jp-GpuPlat-queues');
    this._list = h('ul', { class: 'jp-GpuPlat-queueList', 'aria-label': 'Queues' });
    this._error = h('div');
    this.node.append(this._error, this._list);
    _opts.source.changed.connect(() => {
      this._error.replaceChildren();
      this.render();
    }, this);
    _opts.source.failed.connect((_, error) => this._error.replaceChildren(errorBox(error)), this);
  }

  get queues(): IQueue[] {
    return this._opts.source.queues;
  }

  /** Reload (coalesced: a burst of status events costs one request). */
  schedule(): void {
    this._opts.source.schedule();
  }

  refresh(): Promise<void> {
    return this._opts.source.refresh();
  }

  render(): void {
    this._render();
    this._opts.onRendered?.();
  }

  private _render(): void {
    if (!this.queues.length) {
      this._list.replaceChildren(h('li', { class: 'jp-GpuPlat-empty' }, 'No queues you may use.'));
      return;
    }
    this._lines.clear();
    this._list.replaceChildren(
      ...this.queues.map(q => {
        const v = queueView(q, this._opts.longestWait(q.name));
        // The server says what this user may do to the queue (pause or resume: platform admins).
        const action = (q.actions ?? []).includes(v.paused ? 'resume' : 'pause')
          ? h(
              'button',
              {
                class: 'jp-GpuPlat-button jp-GpuPlat-queueAction',
                title: v.paused ? `Resume queue ${q.name}: dispatch starts again` : `Pause queue ${q.name}: nothing new is dispatched`,
                onclick: () => void this._toggle(q)
              },
              v.paused ? 'Resume' : 'Pause'
            )
          : null;
        return h(
          'li',
          { class: `jp-GpuPlat-queue${v.paused ? ' jp-mod-paused' : ''}`, 'data-queue': q.name },
          h(
            'div',
            { class: 'jp-GpuPlat-queueHead' },
            h('span', { class: 'jp-GpuPlat-queueName' }, q.name),
            h('span', { class: 'jp-GpuPlat-muted' }, `priority ${v.priority}`),
            v.paused ? h('span', { class: 'jp-GpuPlat-chip jp-mod-paused' }, 'paused') : null,
            h('span', { class: 'jp-GpuPlat-spacer' }),
            action
          ),
          meter('GPUs', v.gpuText, v.gpuFraction),
          // the GPU quota per flavor, in the order the queue tries them
          ...v.flavors.map(f => meter(f.name, f.text, f.fraction)),
          meter('Runs', v.runsText, v.runsFraction),
          this._pendingLine(q.name, pendingLine(v)),
          v.waitText ? h('div', { class: 'jp-GpuPlat-queueWait' }, v.waitText) : null,
          h('div', { class: 'jp-GpuPlat-queueRules jp-GpuPlat-muted' }, queueRulesText(q)),
          this._pending(q)
        );
      })
    );
  }

  /** Whether a shown queue has waiting runs (their longest wait counts on). */
  get live(): boolean {
    return this.isVisible && this.queues.some(q => pendingCount(q) > 0);
  }

  /** Every second: the longest waits, text only (the links stay clickable). */
  tick(): void {
    for (const q of this.queues) {
      const el = this._lines.get(q.name);
      const text = pendingLine(queueView(q, this._opts.longestWait(q.name)));
      if (el && el.textContent !== text) {
        el.textContent = text;
      }
    }
  }

  private _pendingLine(name: string, text: string): HTMLElement {
    const el = h('div', { class: 'jp-GpuPlat-queuePending' }, text);
    this._lines.set(name, el);
    return el;
  }

  /** The pending runs in queue order, each a link to the run when we may see it. */
  private _pending(q: IQueue): HTMLElement | null {
    const runs = pendingRuns(q) ?? [];
    const hidden = hiddenPendingText(q);
    if (!runs.length && !hidden) {
      return null;
    }
    return h(
      'ol',
      { class: 'jp-GpuPlat-pendingList', 'aria-label': `Pending runs of queue ${q.name}` },
      ...runs.map(p => {
        const text = pendingRunText(p);
        const body =
          p.id && this._opts.onOpen
            ? h(
                'a',
                {
                  class: 'jp-GpuPlat-runLink',
                  href: '#',
                  'data-run-id': p.id,
                  title: `Open run ${p.id}`,
                  onclick: (e: MouseEvent) => {
                    e.preventDefault();
                    this._opts.onOpen?.(p.id!);
                  }
                },
                text
              )
            : h('span', null, text);
        return h('li', { class: 'jp-GpuPlat-pendingRun', 'data-position': p.position }, body);
      }),
      hidden ? h('li', { class: 'jp-GpuPlat-pendingHidden jp-GpuPlat-muted' }, hidden) : null
    );
  }

  dispose(): void {
    this._opts.source.dispose();
    super.dispose();
  }

  private _toggle(q: IQueue): Promise<void> {
    return this._opts.source.toggle(q);
  }

  private _list: HTMLElement;
  private _error: HTMLElement;
  private _lines = new Map<string, HTMLElement>();
}

function pendingLine(v: { pendingText: string; oldestWaitText: string }): string {
  return v.oldestWaitText ? `${v.pendingText} · ${v.oldestWaitText}` : v.pendingText;
}

function meter(label: string, text: string, fraction: number | null): HTMLElement {
  const bar = h('div', { class: 'jp-GpuPlat-meterBar' });
  bar.style.width = `${Math.round((fraction ?? 0) * 100)}%`;
  if (fraction !== null && fraction >= 1) {
    bar.classList.add('jp-mod-full');
  }
  return h(
    'div',
    { class: 'jp-GpuPlat-meter' },
    h('span', { class: 'jp-GpuPlat-meterLabel' }, label),
    h(
      'div',
      {
        class: 'jp-GpuPlat-meterTrack',
        role: 'meter',
        'aria-label': `${label}: ${text}`,
        'aria-valuemin': 0,
        'aria-valuemax': 100,
        'aria-valuenow': Math.round((fraction ?? 0) * 100)
      },
      bar
    ),
    h('span', { class: 'jp-GpuPlat-meterText' }, text)
  );
}
