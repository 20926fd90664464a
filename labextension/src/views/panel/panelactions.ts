/** The run detail's buttons as JupyterLab commands (registered by the main-area plugin). */

import type { CommandRegistry } from '@lumino/commands';

import type { IRunActions } from '../runs/rundetail';

/** The actions a sidebar run detail offers; none without the command registry. */
export function runActions(commands: CommandRegistry | undefined, onError: (error: unknown) => void): IRunActions | undefined {
  if (!commands) {
    return undefined;
  }
  const run = (command: string, args: Record<string, string>) => void commands.execute(command, args).catch(onError);
  return {
    openInTab: id => run('gpuplat:open-run', { id }),
    openFolder: id => run('gpuplat:open-run-folder', { id }),
    resubmit: id => run('gpuplat:resubmit', { id }),
    openOutput: (id, path) => run('gpuplat:open-output', { id, path })
  };
}
