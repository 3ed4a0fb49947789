"""What a per-host page (pipelines.site.per_host) reads from beyond its own host, as digests of inputs.

A per-host page's cache key (pipelines.site.page_cache) holds its host's artifacts, the fleet's shared
artifacts and registries, and what the page declares it reads across hosts (``SplitPage.reads``). Those
reads are named here by the inputs they come from, each computed once per loaded set and shared by every
page that reads it, never by the output they make (a host's boards, its role assignments): keying a
page by its own rendered content costs what rendering it costs.

What the split pages read across hosts (each page's render, followed through the pipelines it calls):

* **every page that figures a speed over the whole set's runs** (per-host boards, roles): a figure is a
  group of one host's runs (the comparability key holds the host), widened, where its host has no
  run-to-run noise estimate yet, by the fleet's pooled noise for that kind of test (pipelines.facts):
  ``fleet_noise``, of the kinds of test the host ran without an estimate of its own (a host with its own
  for every kind it ran reads none of it). The host's label can depend on the other hosts' fingerprints
  (pipelines.hostnames tells apart hosts of one name): ``label``.
* **roles**: a role that reads only quality judges every configuration the fleet measured anywhere (any
  host's runs make it a candidate on every host), by the quality artifacts (shared) and the
  configuration's own description (model, file size, backend) as the first artifact of it gives them;
  a role that reads speed, memory or serving judges the host's own runs plus the configurations measured
  nowhere: ``role_configurations`` (pipelines.roles.join, one row per configuration). The registries
  (roles, models) are the data folder's files (shared), or the project's when the folder has none
  (``registries``).
* **hosts, serving, comparisons, optimization**: their render gets the host's runs only (and the set's
  quality, perplexity and noise artifacts, which are shared): nothing across hosts.

Nothing here depends on every host's artifacts as such: one more host's run changes these digests only
where it changes what the other pages show (a configuration no host had measured; the fleet's pooled noise,
for the hosts that fall back on it). The hosts, serving, comparisons and optimization pages of the other
hosts never change with it.
"""

from __future__ import annotations

from pipelines import dataset
from pipelines.site import page_cache


def fleet_noise(host: str) -> str:
    """The fleet's pooled run-to-run noise (pipelines.facts) for the kinds of test the host ran and has no
    estimate of its own for: what widens the interval of one of its runs measured once. A host with its own
    estimate for each kind it ran reads none of it (core.stats.pooled_side)."""
    from pipelines.site import set_macros

    # kept between builds by the set's content (pipelines.site.set_macros): with nothing new, no fact layer
    noise = dataset.load().derived(
        "page_inputs:noise",
        lambda ds: set_macros.kept("page_inputs:noise", lambda: _noise(ds)),
    )
    return str(noise.get(host, ""))


def _noise(ds: dataset.Dataset) -> dict[str, str]:
    """Host -> the digest of the fleet noise it falls back on (hosts that fall back on none are left out)."""
    from core import noise as noise_core
    from pipelines import facts

    fx = facts.of_loaded()
    classes: dict[str, set[str]] = {}
    for r in ds.runs:
        classes.setdefault(r.host_id, set()).add(noise_core.noise_class(r.test))
    out = {}
    for host, kinds in classes.items():
        read = []
        for cls in sorted(kinds):
            own = fx.noise.get((host, cls))
            pooled = fx.fleet_noise.get(cls)
            if (own is None or not own.df > 0) and pooled is not None:
                read.append(
                    (
                        cls,
                        pooled.sigma,
                        pooled.df,
                        pooled.source,
                        pooled.too_noisy,
                        pooled.why,
                    )
                )
        if read:
            out[host] = page_cache.value_digest(read)
    return out


def label(host: str) -> str:
    """The host's label as the whole set's artifacts and the hosts registry (hosts.yaml) resolve it
    (pipelines.hostnames); once per build (a registry can change between two builds of one loaded set)."""
    from pipelines.site.per_host import host_labels

    return host_labels().get(host, host)


def role_configurations() -> str:
    """Every configuration the roles judge (pipelines.roles.join over the set's quality and runs): its
    identity and description, and whether any host's runs measured it."""
    from pipelines.site import set_macros

    return str(
        dataset.load().derived(
            "page_inputs:role_configurations",
            lambda ds: set_macros.kept(
                "page_inputs:role_configurations", lambda: _configurations(ds)
            ),
        )
    )


def _configurations(ds: dataset.Dataset) -> str:
    from pipelines import roles

    configs = roles.join(list(ds.quality), list(ds.runs))
    return page_cache.value_digest(
        [
            (
                c.identity,
                c.model,
                c.model_sha256,
                c.settings,
                c.size_bytes,
                c.backend,
                bool(c.runs),
            )
            for c in configs.values()
        ]
    )


def registries() -> str:
    """The roles' and models' registries as the roles read them (pipelines.site.page_cache.registries)."""

    return page_cache.registries()


def boards(host: str) -> str:
    """What one host's boards read across hosts."""
    return f"noise {fleet_noise(host)}\0label {label(host)}"


def roles_page(host: str) -> str:
    """What one host's Roles page reads across hosts."""
    return (
        f"noise {fleet_noise(host)}\0label {label(host)}\0configurations "
        f"{role_configurations()}\0registries {registries()}"
    )
