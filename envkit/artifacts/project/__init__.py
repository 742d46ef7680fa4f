"""The user's project, read as data (nothing in it is imported or run): its files walked (`walk`), its dependency
files read (`deps`), each dependency classified by the migration table (`table`, `classify`) and held to a lock's
pins, Python and arch (`lockcheck`), with the findings each gives (`findings`). `envkit scan` reports them
(`envkit.jobs.scan`); `envkit lock --project` takes the dependencies into the closure (`requirements`,
`envkit.artifacts.closure`)."""
