"""Where the scheduler is and which tokens to use, from the same AIJOB_* settings as the services.

Tokens: AIJOB_SERVICE_TOKEN / AIJOB_ADMIN_TOKEN, else the first of AIJOB_SERVICE_TOKENS /
AIJOB_ADMIN_TOKENS, else the development tokens file the scheduler wrote on loopback.
"""

from __future__ import annotations

from typing import Annotated

import grpc
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.config import DEV_TOKENS_FILE, client_channel, comma_list, dev_token, named_token

__all__ = ["ClientSettings", "MissingTokenError"]


class MissingTokenError(RuntimeError):
    pass


class ClientSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AIJOB_", extra="ignore")

    scheduler_addr: str = ""
    listen: str = "127.0.0.1:50051"
    user_id: str = "cli-user"
    service_token: SecretStr = SecretStr("")
    admin_token: SecretStr = SecretStr("")
    service_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    admin_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    dev_tokens_file: str = DEV_TOKENS_FILE
    tls_ca: str = ""
    #: Where ``aijob console`` serves the operators' console.
    console_listen: str = "127.0.0.1:8088"
    #: The console's own TLS certificate and key (PEM files): it then serves HTTPS.
    console_tls_cert: str = ""
    console_tls_key: str = ""
    #: A proxy in front of the console terminates TLS and says so (X-Forwarded-Proto,
    #: X-Forwarded-For): its word is taken for the cookie's Secure flag and the sign-in limit.
    console_trust_proxy: bool = False
    #: Serve plain HTTP on an address other than loopback anyway (the session cookie then
    #: crosses the network in clear).
    console_allow_plain_http: bool = False

    @field_validator("service_tokens", "admin_tokens", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return comma_list(value)

    @property
    def address(self) -> str:
        return self.scheduler_addr or self.listen

    def token(self, role: str) -> str:
        single = self.service_token if role == "service" else self.admin_token
        many = self.service_tokens if role == "service" else self.admin_tokens
        if single.get_secret_value():
            return single.get_secret_value()
        if many:
            return named_token(many[0].get_secret_value())[1]
        token = dev_token(self.dev_tokens_file, role)
        if token is None:
            raise MissingTokenError(
                f"no {role} token: set AIJOB_{role.upper()}_TOKEN (or run from the directory where "
                "`make run` wrote .aijob/dev-tokens.json)"
            )
        return token

    def channel(self) -> grpc.aio.Channel:
        return client_channel(self.address, ca=self.tls_ca)
