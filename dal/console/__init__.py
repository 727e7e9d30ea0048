"""`dal console`: the operator console, a local web page that shows why each run waits and lets a person
decide (docs/console.md). The server (Starlette, uvicorn, Jinja2: the `console` extra) is imported only by
that command; `dal.console.urls` needs none of it."""
