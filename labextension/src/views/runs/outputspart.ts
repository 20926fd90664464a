/** A run's output files: each a link that opens it in a main-area tab (when offered), its size, Download. */

import { h } from '../dom';
import type { IOutputFile } from '../../api/types';
import { formatBytes } from '../../models/viewmodel';

export interface IOutputsOptions {
  /** The run has ended: "wrote no output files" rather than "none yet". */
  ended: boolean;
  /** Open one file in a main-area tab (gpuplat:open-output); absent: the name is plain text. */
  open?: (path: string) => void;
  download: (path: string) => void;
}

export function renderOutputs(node: HTMLElement, files: IOutputFile[], o: IOutputsOptions): void {
  if (!files.length) {
    node.replaceChildren(h('div', { class: 'jp-GpuPlat-muted' }, o.ended ? 'The run wrote no output files.' : 'No output files yet.'));
    return;
  }
  const name = (path: string) =>
    o.open
      ? h(
          'a',
          {
            class: 'jp-GpuPlat-outputPath jp-GpuPlat-runLink',
            href: '#',
            title: `Open ${path} in a main-area tab`,
            onclick: (e: MouseEvent) => {
              e.preventDefault();
              o.open?.(path);
            }
          },
          path
        )
      : h('span', { class: 'jp-GpuPlat-outputPath', title: path }, path);
  node.replaceChildren(
    h(
      'ul',
      { class: 'jp-GpuPlat-outputList' },
      ...files.map(f =>
        h(
          'li',
          { class: 'jp-GpuPlat-output' },
          name(f.path),
          h('span', { class: 'jp-GpuPlat-muted' }, formatBytes(f.size)),
          h(
            'button',
            { class: 'jp-GpuPlat-button', title: `Download ${f.path}`, 'aria-label': `Download ${f.path}`, onclick: () => o.download(f.path) },
            'Download'
          )
        )
      )
    )
  );
}
