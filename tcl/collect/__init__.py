"""Real measurement of MetaSchedule candidates on a platform, written to the record store."""
