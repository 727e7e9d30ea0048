"""Git's own files as git reads them (repository discovery, the index), for the check, the wall and the guard."""
