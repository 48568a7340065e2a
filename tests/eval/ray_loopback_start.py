"""``ray start`` that keeps a loopback address as given, for the two-node test on one machine
(``python tests/eval/ray_loopback_start.py start --block --node-ip-address=127.0.0.1 ...``).

Ray 2.60's ``ray start`` rewrites ``127.0.0.1`` (in ``--node-ip-address`` and ``--address``) into
the machine's routable address (``ray._private.services.resolve_ip_for_localhost``), so a node
meant for loopback binds on the network interface, and a worker node cannot reach a head that
listens on loopback. Its single-machine mode (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) keeps the
address but refuses to start a worker node. This wrapper keeps loopback addresses and changes
nothing else; the test checks the nodes' registered addresses and every listening socket."""

from __future__ import annotations

import sys

from ray._common.network_utils import is_localhost
from ray._private import services

_resolve = services.resolve_ip_for_localhost


def _keep_loopback(host: str) -> str:
    return "127.0.0.1" if host and is_localhost(host) else _resolve(host)


if __name__ == "__main__":
    services.resolve_ip_for_localhost = _keep_loopback
    from ray.scripts.scripts import main

    sys.argv = ["ray", *sys.argv[1:]]
    main()
