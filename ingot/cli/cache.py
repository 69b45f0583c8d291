"""``ingot cache``: show, trim or clear the kernel cache (ccache's ``-s``/``-C``/``-M``).

Note: the cache holds compiled libraries and objects, their C, lowered kernel C and whole
compiled model packages (``package``: `ingot.workflow.package_cache`); `ingot.codegen.disk_cache`
explains the layout, the size cap and the LRU eviction. With no
option the command shows the statistics. ``--dir`` picks another cache directory than the
default (``$INGOT_CACHE_DIR`` or ``~/.cache/ingot/kernels``). The cap set with ``--max-size`` is
stored in the directory (``cache-config.json``) and obeyed by every process that uses it.

Example:
    $ ingot cache                    # statistics (same as --show-stats)
    $ ingot cache --max-size 5G      # cap; the next write past it evicts least recently used files
    $ ingot cache --evict            # trim to the cap now
    $ ingot cache --clear            # delete every entry
    $ ingot cache --verify           # hash every compiled package in full; delete the corrupt ones
"""
from __future__ import annotations

import click

from .common import CLIError, errors


@click.command("cache")
@click.option("-s", "--show-stats", is_flag=True, help="print size per kind, the cap and last use (the default)")
@click.option("-M", "--max-size", default=None, help="set the size cap: 2G, 500M, 64k or bytes (stored in the dir)")
@click.option("--evict", "evict_now", is_flag=True, help="delete least recently used files down to the cap now")
@click.option("-C", "--clear", "clear_all", is_flag=True, help="delete every cache entry (the cap setting stays)")
@click.option("--keep-recent", default=0.0, type=click.FloatRange(min=0.0), show_default=True,
              help="with --clear: keep files used in the last N seconds (safe beside running compiles)")
@click.option("--verify", "verify_now", is_flag=True,
              help="hash every compiled package's files in full (a hit trusts unchanged stamps) and delete "
                   "the entries that fail")
@click.option("--dir", "directory", default=None, type=click.Path(file_okay=False),
              help="cache directory (default: $INGOT_CACHE_DIR or ~/.cache/ingot/kernels)")
def cache_cmd(show_stats: bool, max_size: "str | None", evict_now: bool, clear_all: bool, keep_recent: float,
              verify_now: bool, directory: "str | None") -> None:
    """Show, cap, trim or clear the kernel and package cache."""
    from ingot.codegen import disk_cache

    with errors():
        if max_size is not None:
            try:
                size = disk_cache.set_max_size(max_size, directory)
            except ValueError as err:
                raise CLIError(f"--max-size: {err}") from None
            click.echo(f"max size set to {disk_cache.format_size(size)}", err=True)
        if clear_all:
            report = disk_cache.clear(directory, min_age_s=keep_recent)
            click.echo(f"cleared: {report.files_removed} files, {disk_cache.format_size(report.bytes_removed)}"
                       + (f" ({report.files_kept_recent} recently used kept)" if report.files_kept_recent else ""),
                       err=True)
        elif evict_now:
            report = disk_cache.evict(directory)
            if report.skipped:
                click.echo("another process is evicting; nothing done", err=True)
            else:
                click.echo(f"evicted: {report.files_removed} files, {disk_cache.format_size(report.bytes_removed)}; "
                           f"{disk_cache.format_size(report.bytes_after)} left"
                           + (f" ({report.files_kept_recent} recently used kept)" if report.files_kept_recent
                              else ""), err=True)
        if verify_now:
            from ingot.workflow import package_cache

            checked, deleted = package_cache.verify(directory)
            click.echo(f"verified: {checked} packages, {len(deleted)} corrupt deleted"
                       + "".join(f"\n  {key}" for key in deleted), err=True)
        if show_stats or not (max_size or clear_all or evict_now or verify_now):
            click.echo(disk_cache.stats(directory).format())
