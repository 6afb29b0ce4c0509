"""[xclaw] `python -m xclaw`: the `xclaw` command."""

from xclaw.cli.main import main

if __name__ == "__main__":
    main()
