"""Tools for DAL's own development (`python -m dal.tools.layers`); nothing a run imports."""
