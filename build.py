"""Build the Kernel Lab Notes site from the stored runs.

python build.py             # validate data/, render pages, build site/ (MkDocs, strict)
python build.py --strict    # also fail when the data contradict a claim on a page
python build.py --serve     # build, then preview at http://127.0.0.1:8000/
python build.py --engine zensical   # build the same pages with Zensical (pip install -e '.[test]')
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contract.schema import RunFileError
from publish.site import GENERATORS, BuildError, build

ROOT = Path(__file__).resolve().parent


def server(site: Path, port: int):  # type: ignore[no-untyped-def]
    """The preview server, bound before the build: a busy port is reported at once."""
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strict", action="store_true", help="fail when the data contradict a claim")
    ap.add_argument("--serve", action="store_true", help="preview the built site")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--out", type=Path, default=ROOT / "site", help="output directory (default site/)")
    ap.add_argument("--site-url", help="the address the site will be served from (default: mkdocs.yml's)")
    ap.add_argument(
        "--engine",
        choices=sorted(GENERATORS),
        default="mkdocs",
        help="the site generator: MkDocs with Material, or Zensical",
    )
    args = ap.parse_args(argv)
    site_url = args.site_url or (f"http://127.0.0.1:{args.port}/" if args.serve else None)
    httpd = None
    if args.serve:
        try:
            httpd = server(args.out, args.port)
        except OSError as exc:
            print(
                f"cannot serve on 127.0.0.1:{args.port}: {exc.strerror or exc} (is another preview running?); "
                "pass --port N. Nothing was built.",
                file=sys.stderr,
            )
            return 2
    try:
        try:
            report = build(ROOT, args.out, strict=args.strict, site_url=site_url, engine=args.engine)
        except (RunFileError, BuildError) as exc:
            print(f"build failed: {exc}", file=sys.stderr)
            print(f"the previous {args.out} is unchanged", file=sys.stderr)
            return 1
        print("\n".join(report.lines()))
        if httpd is not None:
            print(f"serving {args.out} at http://127.0.0.1:{args.port}/ (Ctrl-C to stop)")
            httpd.serve_forever()
        return 0
    finally:
        if httpd is not None:
            httpd.server_close()


if __name__ == "__main__":
    sys.exit(main())
