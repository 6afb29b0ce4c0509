"""[demo] `xclaw demo`: the crash, resume, rollback and fork walk."""
