"""The search server's routes, one `APIRouter` per subject; `search_engine.api.create_app` assembles them.

- `search`: `POST /search` and upstream VRAG's `GET /search`;
- `pages`: one page's record, layout and image (`/pages/{page_id}...`);
- `index`: the index as a whole: its documents, its stats, `POST /reload`;
- `health`: `GET /health`, the one route that needs no API key.

What they share (the served engine, the API key check, how server paths are shown) is `common`; it is read
from `app.state`, so one app's options never leak into another's.
"""
