"""Files the sandbox serves to browsers: the client SDK, its hosted flow and the dashboard."""

from importlib import resources


def static_text(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
