"""(being written)"""

from __future__ import annotations

from fastapi import APIRouter

from weft.api.context import ApiContext


def router(ctx: ApiContext) -> APIRouter:
    return APIRouter()
