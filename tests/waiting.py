"""The one poll interval tests use while waiting on a condition with a deadline."""

POLL_SECONDS = 0.02
