/**
 * "Why is it here?" of one run: the explain answer, its message kept live (a running
 * run's "running for …" counts on), blockers' run ids as links, "Submit again…" where
 * the answer's line is about resubmitting and the run's `actions` let this user; where its
 * flavors wait differently, each flavor's reason in the queue's order.
 */

import { h } from '../dom';
import type { IExplain, IRunDetail } from '../../api/types';
import { explainView, liveMessage } from '../../models/viewmodel';

export interface IExplainPartOptions {
  /** Open another run (a blocker's id). */
  onOpen?: (id: string) => void;
  /** Open the submit dialog prefilled from this run. */
  resubmit?: () => void;
}

export class ExplainPart {
  constructor(private _opts: IExplainPartOptions) {
    this.node = h('div', { class: 'jp-GpuPlat-explain', 'aria-live': 'polite' });
  }

  readonly node: HTMLElement;

  /** `elapsed`: seconds since `run` was read (its ticking clock goes on by them). */
  render(ex: IExplain, run: IRunDetail | null, elapsed: number): void {
    this._ex = ex;
    const v = explainView(ex);
    this.node.dataset.side = v.side;
    const list = (cls: string, title: string, items: Array<HTMLElement | string>) =>
      items.length
        ? h('div', { class: cls }, h('div', { class: 'jp-GpuPlat-explainLabel' }, title), h('ul', null, ...items.map(i => h('li', null, i))))
        : null;
    this._message = h('div', { class: 'jp-GpuPlat-explainMessage' });
    const blockers = v.blockers.map((text, i) => {
      const id = v.blockerIds[i];
      if (!id || !this._opts.onOpen) {
        return text;
      }
      const rest = text.slice(id.length);
      return h(
        'span',
        null,
        h('a', { class: 'jp-GpuPlat-runLink', href: '#', 'data-run-id': id, title: `Open run ${id}`, onclick: (e: MouseEvent) => this._open(e, id) }, id),
        rest
      );
    });
    const who = v.whoCanAct.map((text, i) => {
      // The answer names the action a line is about; the run's `actions` say whether this user may take it.
      const action = ex.who_can_act[i]?.action;
      if (!this._opts.resubmit || action !== 'resubmit' || !run?.actions?.includes('resubmit')) {
        return text;
      }
      return h(
        'span',
        null,
        text,
        ' ',
        h('button', { class: 'jp-GpuPlat-button jp-GpuPlat-resubmit', title: 'Open the submit dialog filled in from this run', onclick: () => this._opts.resubmit?.() }, 'Submit again…')
      );
    });
    const parts: Array<HTMLElement | null> = [
      h('div', { class: 'jp-GpuPlat-explainLayer' }, h('span', { class: `jp-GpuPlat-side jp-mod-${v.side}` }, v.layerLabel)),
      h('div', { class: 'jp-GpuPlat-explainHeadline' }, v.headline),
      this._message,
      list('jp-GpuPlat-explainFlavors', 'Per flavor, in the order tried', v.flavors),
      list('jp-GpuPlat-explainNumbers', 'Numbers', v.numbers),
      list('jp-GpuPlat-explainBlockers', 'Held up by', blockers),
      list('jp-GpuPlat-explainDetails', 'Executor says', v.details),
      list('jp-GpuPlat-explainWho', 'Who can act', who)
    ];
    this.node.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
    this.tick(run, elapsed);
  }

  /** The message's "running for" is the run's clock (the answer itself is re-read on events only). */
  tick(run: IRunDetail | null, elapsed: number): void {
    if (!this._ex || !this._message) {
      return;
    }
    const text = liveMessage(this._ex.message, run, elapsed);
    if (this._message.textContent !== text) {
      this._message.textContent = text;
    }
  }

  private _open(e: MouseEvent, id: string): void {
    e.preventDefault();
    this._opts.onOpen?.(id);
  }

  private _ex: IExplain | null = null;
  private _message: HTMLElement | null = null;
}
