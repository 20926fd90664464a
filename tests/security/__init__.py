"""The hostile-run suite: a member's run, started through the API, tries to reach past its own run (issue 21)."""
