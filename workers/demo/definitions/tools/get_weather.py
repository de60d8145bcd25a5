"""Weather for a city (a fixed table: the demo runs offline)."""

from pydantic import BaseModel, Field

from weft.activities.tool_state import ThreadState
from weft.definitions import define_tool

FORECASTS = {"paris": ("light rain", 14), "tokyo": ("clear", 22), "oslo": ("snow", -3)}


class WeatherArgs(BaseModel):
    city: str = Field(description="City name, e.g. Paris")


def get_weather(state: ThreadState, args: WeatherArgs) -> dict[str, str | int | None]:
    sky, celsius = FORECASTS.get(args.city.lower(), ("unknown", None))
    return {"city": args.city, "sky": sky, "celsius": celsius}


tool = define_tool(
    description="Current weather for a city",
    args=WeatherArgs,
    execute=get_weather,
)
