"""The engineers' web pages: server-rendered, autoescaped, CSRF-protected, working without JS."""

from advisor.domain.web.controllers import SignInController, WebController
from advisor.domain.web.security import SecurityHeadersMiddleware, csrf_config, resolve_secret_key, session_config
from advisor.domain.web.submission import submit_form
from advisor.domain.web.templating import static_router, template_config

__all__ = [
    "SecurityHeadersMiddleware",
    "SignInController",
    "WebController",
    "csrf_config",
    "resolve_secret_key",
    "session_config",
    "static_router",
    "submit_form",
    "template_config",
]
