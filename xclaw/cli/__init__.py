"""[cli] The `xclaw` command, one module per group of subcommands."""
