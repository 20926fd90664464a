/** What code a run ran, as the detail's Code section lists it: where it ran, its snapshot, its git commit. */

import type { IRunDetail } from '../api/types';

/** What code ran, as label/value pairs: where it ran, the snapshot kept with the run, the git commit. */
export function codeFacts(run: IRunDetail): Array<[string, string]> {
  const facts: Array<[string, string]> = [['Ran in', run.working_dir || 'the run\'s artifact directory']];
  const code = run.code;
  if (!code) {
    // still in our queue (the service's phase): the snapshot is taken at dispatch
    facts.push(['Snapshot', run.phase === 'dispatch' ? 'taken when the run starts' : 'none']);
    return facts;
  }
  facts.push(['Snapshot', code.snapshot ? `${code.snapshot} (in outputs)` : 'none (a command)']);
  const git = code.git;
  if (git?.commit) {
    facts.push(['Git commit', `${git.commit.slice(0, 12)}${git.dirty ? ' + uncommitted changes' : ''}`]);
    if (git.diff_path) {
      facts.push(['Diff', `${git.diff_path} (in outputs)`]);
    }
  }
  return facts;
}
