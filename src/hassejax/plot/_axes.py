"""The axes check of the drawing functions (private): a matplotlib ``Axes`` of the right kind, or an error naming it."""

from __future__ import annotations

from ..errors import ParameterError


def check_axes(ax, name: str = "ax", *, three_d: bool = False, none_ok: bool = False) -> None:
    """Raise :class:`~hassejax.errors.ParameterError` naming `name` unless `ax` is a matplotlib ``Axes`` that is 3-D
    (``projection="3d"``) when `three_d` and 2-D otherwise; None passes when `none_ok` (the caller makes a figure).

    A 2-D drawing on 3-D axes met ``TypeError: Axes3D.text() missing 1 required positional argument``, a 3-D one on
    2-D axes ``TypeError: Axes.scatter() got multiple values for argument 's'`` (a review)."""
    from matplotlib.axes import Axes

    if ax is None and none_ok:
        return
    if not isinstance(ax, Axes):
        extra = " or None (a new figure)" if none_ok else ""
        raise ParameterError(f"`{name}` must be a matplotlib Axes{extra}; got {type(ax).__name__}.")
    is_3d = getattr(ax, "name", "") == "3d"
    if three_d and not is_3d:
        raise ParameterError(
            f"`{name}` must be 3-D axes (projection='3d', e.g. from hassejax.plot.dynamics.new_figure with \"3d\"); "
            f"got 2-D axes ({ax.name!r})."
        )
    if not three_d and is_3d:
        raise ParameterError(f"`{name}` must be 2-D axes; got 3-D axes (projection='3d').")
