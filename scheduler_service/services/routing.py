"""The operators' side of model routes and circuit breakers: a job type's route (set, read),
a breaker's reset, and each model key's breaker state for the admin API, the console and the
metrics (core/routes.py, core/breakers.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduler_service.core.breakers import BreakerKey, BreakerState
from scheduler_service.core.errors import InvalidRequestError, UnknownJobTypeError
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.model_keys import PLATFORM, USER, ModelKey, key_model
from scheduler_service.core.routes import ModelRoute, ModelTier, Router, checked_tiers
from scheduler_service.ports import UnitOfWork

__all__ = ["ModelRoutes", "router_of"]

#: Worst first: what one scope's state is when its users' keys differ.
_SEVERITY = {BreakerState.OPEN: 2, BreakerState.HALF_OPEN: 1, BreakerState.CLOSED: 0}


def router_of(registry: JobRegistry, router: Router) -> Router:
    """``router`` reading each job type's own model from ``registry``."""

    def definition_tier(job_type: str) -> ModelTier | None:
        if job_type not in registry:
            return None
        definition = registry.get(job_type)
        return ModelTier(definition.model_provider, definition.model_name)

    return replace(router, definition_tier=definition_tier)


@dataclass(frozen=True, slots=True)
class ModelRoutes:
    uow: UnitOfWork
    registry: JobRegistry
    router: Router

    def _known(self, job_type: str) -> None:
        if job_type not in self.registry:
            raise UnknownJobTypeError(job_type)

    async def route(self, job_type: str) -> ModelRoute:
        """The route ``job_type``'s jobs follow now (an operator's, the settings', or its own
        model alone)."""
        self._known(job_type)
        operator = await self.uow.read(lambda tx: tx.routes.routes())
        definition = self.registry.get(job_type)
        tier = ModelTier(definition.model_provider, definition.model_name)
        return self.router.with_operator(operator).book.route(job_type, tier)

    async def put(self, job_type: str, tiers: Sequence[ModelTier]) -> ModelRoute:
        self._known(job_type)
        try:
            checked = checked_tiers(tiers)
        except ValueError as error:
            raise InvalidRequestError(str(error), field="tiers") from None
        await self.uow.run(lambda tx: tx.routes.put_route(job_type, checked))
        return await self.route(job_type)

    async def reset(self, provider: str, model: str, credential_id: str) -> bool:
        key = BreakerKey(provider, key_model(model), credential_id)
        return await self.uow.run(lambda tx: tx.routes.reset_breaker(key))

    async def states(self) -> dict[ModelKey, BreakerState]:
        """Each model key's breaker: the platform's, and for the user scope the worst of the
        users' keys of the model."""
        _, breakers = await self.uow.read(lambda tx: tx.routes.breakers())
        found: dict[ModelKey, BreakerState] = {}
        for key, (breaker, _) in breakers.items():
            model_key = ModelKey(key.provider, key.model, USER if key.credential_id else PLATFORM)
            before = found.get(model_key, BreakerState.CLOSED)
            if _SEVERITY[breaker.state] >= _SEVERITY[before]:
                found[model_key] = breaker.state
        return found

    async def open_keys(self) -> list[tuple[str, str, str]]:
        """(provider, model, scope) of each breaker not closed (one per user key)."""
        _, breakers = await self.uow.read(lambda tx: tx.routes.breakers())
        return [
            (key.provider, key.model, USER if key.credential_id else PLATFORM)
            for key, (breaker, _) in breakers.items()
            if breaker.state is not BreakerState.CLOSED
        ]
