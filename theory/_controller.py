"""The engine's default step-size controller for adaptive flows."""

import diffrax

from .checks import check_positive


def default_controller(rtol: float, atol: float) -> diffrax.PIDController:
    """The flows' default step-size controller: PI with pcoeff = 0.4, icoeff = 0.3. After the
    jumps the fitted neurons make the step size stability-limited, where these damp the
    accept/reject oscillation (fewer steps than diffrax's default I controller).

    >>> default_controller(1e-8, 1e-10).pcoeff
    0.4
    """
    check_positive("rtol", rtol, scalar=True)
    check_positive("atol", atol, allow_zero=True, scalar=True)
    return diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=0.4, icoeff=0.3)
