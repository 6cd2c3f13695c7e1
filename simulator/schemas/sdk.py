"""What the hosted flow and the SDK send: the flow's configuration (the base64 JSON of
/initialize/{config}), and the bodies of its own calls (session, company, sign-in, leave)."""

from __future__ import annotations

from typing import Any

from ..domain.flow.sdk import MfaPrompt
from ..domain.shapes import (UNSET, Command, Maybe, Name, Text, Texts, View, choice, of, raw,
                             schema_of, text)
from ..domain.tasks.records import Distribution
from ..domain.tasks.requests import TaskItem, TaskOptions
from ..domain.tasks.states import DEEPLINK_STEPS, PAYMENT_METHOD
from .api import FlowTasks

SdkProduct = text("A product (`deposit`, `verify`, ...; the SDK's Product constants).")
SDK_HANDOFFS = ("exit-prompt", "authentication-success", "high-latency")
SDK_LANGUAGES = ("en", "es")


class SdkTask(TaskOptions, forbid_unknown_fields=False, kw_only=True):
    __schema_extra__ = TaskItem.__schema_extra__

    operation: Maybe[SdkProduct] = UNSET
    product: Maybe[of(SdkProduct, "The SDK docs' name for `operation`.")] = UNSET


class SdkSearch(View, kw_only=True):
    tags: Maybe[Texts] = UNSET
    excluded_tags: Maybe[Texts] = UNSET


class SdkCustomer(View, kw_only=True):
    name: Maybe[of(str, min_length=1, max_length=100)] = UNSET


class Deeplink(View, kw_only=True):
    step: Maybe[choice(*DEEPLINK_STEPS)] = UNSET
    company_id: Maybe[str] = UNSET
    company_name: Maybe[of(str, max_length=200)] = UNSET
    connector_id: Maybe[str] = UNSET


class NavigationOptions(View, kw_only=True):
    show_back_button: Maybe[bool] = UNSET
    show_back_button_text: Maybe[bool] = UNSET
    show_close_button: Maybe[bool] = UNSET


class Theme(View, kw_only=True):
    dark: Maybe[of(bool, "The flow's dark theme.")] = UNSET
    navigation_options: Maybe[NavigationOptions] = UNSET


class SdkConfig(View, kw_only=True):
    """The SDK's configuration (real-service-facts 12): keys the flow does not know are the
    SDK's own and are ignored."""

    public_token: Maybe[text("Optional here: the token reaches the flow through the handshake; "
                             "when both are there they must match.")] = UNSET
    scope: Maybe[choice("user-link", "pay-link")] = UNSET
    tasks: Maybe[of(list[SdkTask], min_length=1, max_length=10)] = UNSET
    product: Maybe[of(SdkProduct, "Deprecated: one task of this product (now `tasks`).",
                      extra_json_schema={"deprecated": True})] = UNSET
    distribution: Maybe[of(Distribution, "Deprecated: the split of the top-level `product`.",
                           extra_json_schema={"deprecated": True})] = UNSET
    additional_product: Maybe[of(SdkProduct, "A second task after the first.")] = UNSET
    language: choice(*SDK_LANGUAGES) = "en"
    handoff: Maybe[of(list[choice(*SDK_HANDOFFS)], "Views the host page shows itself "
                      "(real-service-facts 13).", unique=True)] = UNSET
    search: Maybe[of(SdkSearch, "Enforced search: the flow's company search keeps to these "
                     "tags and leaves out the excluded ones.")] = UNSET
    experiments: Maybe[of(dict[str, Any], "Feature-flag overrides (accepted; the sandbox has "
                          "none to flip).")] = UNSET
    customer: Maybe[of(SdkCustomer, "The app the user connects for: its name in the flow.")] = UNSET
    deeplink: Maybe[Deeplink] = UNSET
    theme: Maybe[Theme] = UNSET
    linked_account: Maybe[Text] = UNSET
    metadata: Maybe[of(dict[str, Any], "Customer context: every event of the tasks the flow "
                       "starts carries it.")] = UNSET


class SdkSessionRequest(Command, kw_only=True):
    config: raw(schema_of(SdkConfig))


class ChosenDistribution(Command, kw_only=True):
    """The split chosen on the direct-deposit-setup screen (the real deposit accounts'
    distributionType and distributionAmount)."""

    type: choice("total", "percent", "fixed")
    amount: Maybe[of(float, gt=0)] = UNSET


class SdkLoginRequest(Command, kw_only=True):
    """`username` and `password` are required, except to reconnect a linked account whose
    session resumes without them (`linkedAccount`, spec: it often does not require
    re-entering credentials)."""

    company_id: Text
    username: Maybe[Name] = UNSET
    password: Maybe[Name] = UNSET
    tasks: Maybe[FlowTasks] = UNSET
    linked_account: Maybe[Text] = UNSET
    metadata: Maybe[dict[str, Any]] = UNSET
    payment_method: Maybe[raw(PAYMENT_METHOD)] = UNSET
    distribution: Maybe[ChosenDistribution] = UNSET
    mfa_answer: Maybe[of(str, "The answer to the MFA challenge a previous login returned.",
                         min_length=1, max_length=200)] = UNSET


class SdkMfaChallenge(View, kw_only=True):
    mfa: MfaPrompt


class SdkCompanyRequest(Command, kw_only=True):
    company_id: Text
    tasks: Maybe[FlowTasks] = UNSET


class SdkLeaveRequest(Command, kw_only=True):
    task_id: text("A task the flow started (its workflow is left).")
