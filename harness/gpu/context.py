"""What lives in the primary context (memory, streams, events, modules, library handles):
each thing's release registered by :func:`context_resource`, run by the last open
:class:`~harness.gpu.driver.Device` before it releases the context."""

from __future__ import annotations

import weakref

_CONTEXT_RESOURCES: list[weakref.finalize] = []
_PRUNE_AT = [256]  # the list's length at which its dead finalizers are next dropped
_RETAINS = [0]  # open Device objects: the primary context dies with the last one's release


def context_resource(obj, release, *args) -> weakref.finalize:
    """``weakref.finalize(obj, release, *args)`` for something that lives in the primary
    context (memory, streams, events, modules, library handles): Device.close() runs every
    one still alive before it releases the context, so none is freed into a destroyed context
    (a module unloaded after the release crashed the interpreter in cuModuleUnload). Only the
    last open Device frees them: the primary context is shared."""
    if len(_CONTEXT_RESOURCES) >= _PRUNE_AT[0]:  # the dead ones dropped now and then: the
        # list scanned at every call cost a default run's worker 8 s over 36,000 events
        _CONTEXT_RESOURCES[:] = [f for f in _CONTEXT_RESOURCES if f.alive]
        _PRUNE_AT[0] = max(256, 2 * len(_CONTEXT_RESOURCES))
    finalizer = weakref.finalize(obj, release, *args)
    _CONTEXT_RESOURCES.append(finalizer)
    return finalizer
