"""The aggregator's own API (routes/aggregator_api.py): its request bodies, answers and
error body as structs (domain/shapes.py), in its snake_case names. A request's struct takes
the tenant's credentials in the body too (`client_id`, `secret`), as the aggregator does;
its nested objects and its answers are open (the aggregator adds fields)."""

from ..domain.links import aggregator
from ..domain.shapes import (NO_CONTROL_CHARACTER, UNSET, Command, Maybe, View, choice, of, raw,
                             schema_of)

Text = of(str, min_length=1, max_length=512, pattern=NO_CONTROL_CHARACTER)
AccessToken = of(Text, "An access token of /item/public_token/exchange.")
Date = of(str, extra_json_schema={"format": "date"})
DateTime = of(str, extra_json_schema={"format": "date-time"})
Institution = of(Text, "A sandbox institution, e.g. ins_109508.")
ProductNames = of(list[of(str, pattern="^[a-z][a-z0-9_]{0,63}$")], max_length=50)
CountryCodes = of(list[choice("US", "GB", "ES", "NL", "FR", "IE", "CA", "DE", "IT", "PL", "DK",
                              "NO", "SE", "EE", "LT", "LV", "PT", "BE", "AT", "FI")],
                  min_length=1, max_length=20, unique=True)
Days = of(int, ge=1, le=730)
Url = of(str, max_length=2048)
ACCEPTED = "Accepted as the aggregator takes it; the sandbox's link tokens do not use it."


class Open(View, rename=None, kw_only=True):
    """An object of the aggregator's: snake_case names, other fields allowed."""


class Request(Command, rename=None, kw_only=True):
    client_id: Maybe[of(Text, "The tenant's API key (else the PLAID-CLIENT-ID header).")] = UNSET
    secret: Maybe[of(Text, "The tenant's API secret (else the PLAID-SECRET header).")] = UNSET


class ItemRequest(Request, kw_only=True):
    access_token: AccessToken


# -- requests ---------------------------------------------------------------------------------

class LinkTransactions(Open, kw_only=True):
    days_requested: of(Days, "How much history the service can pull (spec: Limits, "
                       "transaction history length).") = aggregator.DEFAULT_DAYS_REQUESTED
    start_date: Maybe[Date] = UNSET
    end_date: Maybe[Date] = UNSET


class PublicTokenOptions(Open, kw_only=True):
    webhook: Maybe[of(Url, "Where the item's webhooks go (/sandbox/item/fire_webhook); a URL "
                      "the sandbox may send webhooks to.")] = UNSET
    override_username: Maybe[str | None] = UNSET
    override_password: Maybe[str | None] = UNSET
    transactions: Maybe[LinkTransactions] = UNSET


class PublicTokenCreate(Request, kw_only=True):
    institution_id: Institution
    initial_products: of(ProductNames, "The products the link asks for: `transactions` is what "
                         "the service needs (only `auth`: its pipeline fails with "
                         "PRODUCTS_NOT_SUPPORTED).", min_length=1)
    options: Maybe[PublicTokenOptions] = UNSET
    user_token: Maybe[Text] = UNSET
    user_id: Maybe[Text] = UNSET


class PublicTokenExchange(Request, kw_only=True):
    public_token: of(Text, "The public token of /sandbox/public_token/create (one exchange, "
                     "within 30 minutes).")


class AccountsOptions(Open, kw_only=True):
    account_ids: Maybe[of(list[Text], max_length=100)] = UNSET


class AccountsGet(ItemRequest, kw_only=True):
    options: Maybe[AccountsOptions] = UNSET


class ProcessorTokenCreate(ItemRequest, kw_only=True):
    account_id: of(Text, "One account of the item (/accounts/get).")
    processor: of(Text, "The service's processor key at the aggregator (any name: not "
                  "checked).")


class ItemRemove(ItemRequest, kw_only=True):
    reason_code: Maybe[Text] = UNSET
    reason_note: Maybe[of(str, max_length=512) | None] = UNSET


class ItemWebhookUpdate(ItemRequest, kw_only=True):
    webhook: Maybe[of(Url | None, "The item's new webhook URL (null or empty: none).")] = UNSET


class LinkUser(Open, kw_only=True):
    client_user_id: of(Text, "Your id of the user.")
    legal_name: Maybe[Text] = UNSET
    phone_number: Maybe[Text] = UNSET
    email_address: Maybe[Text] = UNSET
    date_of_birth: Maybe[Date] = UNSET


class LinkTokenTransactions(Open, kw_only=True):
    days_requested: Maybe[Days] = UNSET


class LinkTokenCreate(Request, kw_only=True):
    # Fields the aggregator takes and the sandbox's link tokens do not use, named only.
    __schema_extra__ = {"properties": {
        **{name: schema_of(of(Text, ACCEPTED))
           for name in ("link_customization_name", "android_package_name", "institution_id",
                        "appearance_mode", "consumer_report_permissible_purpose")},
        **{name: {"type": "boolean", "description": ACCEPTED}
           for name in ("enable_multi_item_link", "cra_enabled", "financekit_supported")},
        **{name: {"type": "object", "description": ACCEPTED}
           for name in ("institution_data", "account_filters", "eu_config",
                        "payment_configuration", "payment_initiation", "employment",
                        "income_verification", "base_report", "credit_partner_insights",
                        "cra_options", "cra_report_parameter", "auth", "transfer", "update",
                        "identity_verification", "statements", "investments",
                        "investments_auth", "hosted_link", "card_switch", "cashflow_report",
                        "identity")}}}

    client_name: of(str, "Your app's name, as the link flow shows it (30 characters).",
                    min_length=1, max_length=30, pattern=NO_CONTROL_CHARACTER)
    language: of(str, "e.g. en, es, fr.", pattern="^[a-z]{2}$")
    country_codes: CountryCodes
    user: Maybe[LinkUser] = UNSET
    user_id: Maybe[Text] = UNSET
    user_token: Maybe[Text] = UNSET
    products: Maybe[ProductNames] = UNSET
    required_if_supported_products: Maybe[ProductNames] = UNSET
    optional_products: Maybe[ProductNames] = UNSET
    additional_consented_products: Maybe[ProductNames] = UNSET
    webhook: Maybe[Url] = UNSET
    access_token: Maybe[of(AccessToken, "Update mode: the item to relink.")] = UNSET
    access_tokens: Maybe[of(list[Text], max_length=100)] = UNSET
    transactions: Maybe[LinkTokenTransactions] = UNSET
    redirect_uri: Maybe[Url] = UNSET


class InstitutionOptions(Open, kw_only=True):
    include_optional_metadata: Maybe[bool] = UNSET
    include_status: Maybe[bool] = UNSET
    include_auth_metadata: Maybe[bool] = UNSET
    include_payment_initiation_metadata: Maybe[bool] = UNSET


class InstitutionsGetById(Request, kw_only=True):
    institution_id: Institution
    country_codes: CountryCodes
    options: Maybe[InstitutionOptions] = UNSET


class SyncOptions(Open, kw_only=True):
    account_id: Maybe[of(Text, "Only this account's transactions.")] = UNSET
    days_requested: Maybe[Days] = UNSET
    include_original_description: Maybe[bool | None] = UNSET
    include_personal_finance_category: Maybe[bool] = UNSET
    include_logo_and_counterparty_beta: Maybe[bool] = UNSET
    personal_finance_category_version: Maybe[of(str, max_length=16)] = UNSET


class TransactionsSync(ItemRequest, kw_only=True):
    cursor: Maybe[of(str, "The `next_cursor` of the previous answer (none or empty: from the "
                     "start).", max_length=1024, pattern=NO_CONTROL_CHARACTER)] = UNSET
    count: of(int, ge=1, le=500) = aggregator.SYNC_COUNT
    options: Maybe[SyncOptions] = UNSET


class GetOptions(Open, kw_only=True):
    account_ids: Maybe[of(list[Text], "Only these accounts' transactions.", max_length=100)] = UNSET
    count: Maybe[of(int, "Transactions an answer (100 by default).", ge=1, le=500)] = UNSET
    offset: Maybe[of(int, "How many to skip, newest first.", ge=0, le=1_000_000)] = UNSET
    days_requested: Maybe[Days] = UNSET
    include_original_description: Maybe[bool | None] = UNSET
    include_personal_finance_category: Maybe[bool] = UNSET
    include_personal_finance_category_beta: Maybe[bool] = UNSET
    include_logo_and_counterparty_beta: Maybe[bool] = UNSET
    personal_finance_category_version: Maybe[of(str, max_length=16)] = UNSET


class TransactionsGet(ItemRequest, kw_only=True):
    start_date: of(Date, "The earliest date asked for (included).",
                   pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
    end_date: of(Date, "The latest date asked for (included).",
                 pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
    options: Maybe[GetOptions] = UNSET


class BalanceOptions(AccountsOptions, kw_only=True):
    min_last_updated_datetime: Maybe[DateTime] = UNSET


class BalanceGet(ItemRequest, kw_only=True):
    options: Maybe[BalanceOptions] = UNSET


class VerificationKeyGet(Request, kw_only=True):
    key_id: of(Text, "The `kid` of a webhook's Plaid-Verification JWT header.")


class FireOptions(Open, kw_only=True):
    new_transactions: Maybe[of(int, "DEFAULT_UPDATE's `new_transactions`.", ge=0,
                               le=100000)] = UNSET


class FireWebhook(ItemRequest, kw_only=True):
    webhook_code: choice(*aggregator.WEBHOOK_CODES)
    webhook_type: Maybe[choice(*aggregator.WEBHOOK_TYPES, description="By default the code's "
                               "own (DEFAULT_UPDATE: TRANSACTIONS).")] = UNSET
    options: Maybe[FireOptions] = UNSET


# -- answers ----------------------------------------------------------------------------------

class ErrorFields(Open, kw_only=True):
    error_type: of(str, "e.g. INVALID_REQUEST, INVALID_INPUT, ITEM_ERROR, SANDBOX_ERROR")
    error_code: of(str, "e.g. MISSING_FIELDS, UNKNOWN_FIELDS, INVALID_API_KEYS, "
                   "INVALID_ACCESS_TOKEN, ITEM_LOGIN_REQUIRED, NOT_FOUND")
    error_message: str
    display_message: str | None


class Error(ErrorFields, kw_only=True):
    request_id: str


class ItemError(ErrorFields, kw_only=True):
    """ITEM_LOGIN_REQUIRED once the item's login was reset (/item/get; /accounts/get answers
    that error, 400, instead)."""

    status: Maybe[int] = UNSET


class Answer(Open, kw_only=True):
    request_id: str


class Balances(Open, kw_only=True):
    available: float | None
    current: float | None
    limit: float | None
    iso_currency_code: str | None
    unofficial_currency_code: str | None


class Account(Open, kw_only=True):
    account_id: str
    balances: Balances
    mask: str | None
    name: str
    official_name: str | None
    type: str
    subtype: str | None


class Item(Open, kw_only=True):
    item_id: str
    webhook: str | None
    error: ItemError | None
    institution_name: Maybe[str | None] = UNSET
    consented_products: Maybe[list[str]] = UNSET
    available_products: list[str]
    billed_products: list[str]
    products: Maybe[list[str]] = UNSET
    consent_expiration_time: str | None
    update_type: choice("background", "user_present_required")
    institution_id: Maybe[str | None] = UNSET


class TransactionsStatus(Open, kw_only=True):
    last_successful_update: DateTime | None
    last_failed_update: DateTime | None


class LastWebhook(Open, kw_only=True):
    sent_at: DateTime | None
    code_sent: str


class ItemStatus(Open, kw_only=True):
    investments: raw({"type": "null", "description": "No investments in the sandbox."})
    transactions: TransactionsStatus
    last_webhook: LastWebhook | None


class Breakdown(Open, kw_only=True):
    success: of(float, ge=0, le=1)
    error_plaid: of(float, ge=0, le=1)
    error_institution: of(float, ge=0, le=1)
    refresh_interval: Maybe[choice("NORMAL", "DELAYED", "STOPPED")] = UNSET


class ProductStatus(Open, kw_only=True):
    status: choice("HEALTHY", "DEGRADED", "DOWN")
    last_status_change: DateTime
    breakdown: Breakdown


class HealthIncident(Open, kw_only=True):
    start_date: Maybe[str] = UNSET
    end_date: Maybe[str | None] = UNSET
    title: Maybe[str] = UNSET


class InstitutionStatus(Open, kw_only=True):
    """With include_status."""

    item_logins: Maybe[ProductStatus] = UNSET
    transactions_updates: Maybe[ProductStatus] = UNSET
    auth: Maybe[ProductStatus] = UNSET
    identity: Maybe[ProductStatus] = UNSET
    investments_updates: Maybe[ProductStatus] = UNSET
    liabilities_updates: Maybe[ProductStatus] = UNSET
    liabilities: Maybe[ProductStatus] = UNSET
    investments: Maybe[ProductStatus] = UNSET
    health_incidents: Maybe[list[HealthIncident]] = UNSET


class InstitutionRecord(Open, kw_only=True):
    institution_id: str
    name: str
    products: list[str]
    country_codes: list[str]
    routing_numbers: list[str]
    dtc_numbers: list[str]
    oauth: bool
    connection_availability: choice("SUPPORTED", "NOT_SUPPORTED")
    url: Maybe[of(str | None, "With include_optional_metadata.")] = UNSET
    primary_color: Maybe[str | None] = UNSET
    logo: Maybe[of(str | None, "Base64 PNG; none here.")] = UNSET
    status: Maybe[InstitutionStatus] = UNSET


class Category(Open, kw_only=True):
    primary: str
    detailed: str
    confidence_level: Maybe[str | None] = UNSET


class Counterparty(Open, kw_only=True):
    name: str
    type: str
    website: Maybe[str | None] = UNSET
    logo_url: Maybe[str | None] = UNSET
    phone_number: Maybe[str | None] = UNSET
    entity_id: Maybe[str | None] = UNSET
    confidence_level: Maybe[str | None] = UNSET


class Location(Open, kw_only=True):
    address: Maybe[str | None] = UNSET
    city: Maybe[str | None] = UNSET
    region: Maybe[str | None] = UNSET
    postal_code: Maybe[str | None] = UNSET
    country: Maybe[str | None] = UNSET
    store_number: Maybe[str | None] = UNSET
    lat: Maybe[float | None] = UNSET
    lon: Maybe[float | None] = UNSET


class PaymentMeta(Open, kw_only=True):
    reference_number: Maybe[str | None] = UNSET
    ppd_id: Maybe[str | None] = UNSET
    payee: Maybe[str | None] = UNSET
    by_order_of: Maybe[str | None] = UNSET
    payer: Maybe[str | None] = UNSET
    payment_method: Maybe[str | None] = UNSET
    payment_processor: Maybe[str | None] = UNSET
    reason: Maybe[str | None] = UNSET


class Transaction(Open, kw_only=True):
    transaction_id: str
    account_id: str
    amount: of(float, "Positive: money out of the account; negative: money in (a pay "
               "deposit).")
    iso_currency_code: str | None
    unofficial_currency_code: str | None
    date: Date
    authorized_date: Date | None
    datetime: DateTime | None
    authorized_datetime: DateTime | None
    name: str
    merchant_name: str | None
    merchant_entity_id: Maybe[str | None] = UNSET
    original_description: Maybe[str | None] = UNSET
    logo_url: Maybe[str | None] = UNSET
    website: Maybe[str | None] = UNSET
    payment_channel: choice("online", "in store", "other")
    transaction_type: Maybe[choice("digital", "place", "special", "unresolved")] = UNSET
    transaction_code: str | None
    pending: bool
    pending_transaction_id: str | None
    account_owner: str | None
    check_number: Maybe[str | None] = UNSET
    category: list[str] | None
    category_id: str | None
    personal_finance_category: Category
    counterparties: list[Counterparty]
    location: Location
    payment_meta: PaymentMeta


class RemovedTransaction(Open, kw_only=True):
    transaction_id: str
    account_id: str


class PublicTokenCreated(Answer, kw_only=True):
    public_token: str


class PublicTokenExchanged(Answer, kw_only=True):
    access_token: str
    item_id: str


class Accounts(Answer, kw_only=True):
    accounts: list[Account]
    item: Item


class ProcessorTokenCreated(Answer, kw_only=True):
    processor_token: str


class LoginReset(Answer, kw_only=True):
    reset_login: bool


class ItemAnswer(Answer, kw_only=True):
    item: Item


class ItemWithStatus(ItemAnswer, kw_only=True):
    status: ItemStatus


class LinkTokenCreated(Answer, kw_only=True):
    link_token: str
    expiration: DateTime


class InstitutionAnswer(Answer, kw_only=True):
    institution: InstitutionRecord


class TransactionsPage(Answer, kw_only=True):
    transactions_update_status: choice("TRANSACTIONS_UPDATE_STATUS_UNKNOWN", "NOT_READY",
                                       "INITIAL_UPDATE_COMPLETE", "HISTORICAL_UPDATE_COMPLETE")
    accounts: list[Account]
    added: list[Transaction]
    modified: list[Transaction]
    removed: list[RemovedTransaction]
    next_cursor: str
    has_more: bool


class TransactionsGot(Answer, kw_only=True):
    accounts: list[Account]
    transactions: list[Transaction]
    total_transactions: int
    item: Item


class AchNumbers(Open, kw_only=True):
    account_id: str
    account: of(str, "The account number; its last four digits are the account's mask.")
    routing: of(str, "The institution's ABA routing number.")
    wire_routing: str | None
    is_tokenized_account_number: Maybe[bool] = UNSET
    can_transfer_in: Maybe[bool | None] = UNSET
    can_transfer_out: Maybe[bool | None] = UNSET


class EftNumbers(Open, kw_only=True):
    account_id: str
    account: str
    institution: str
    branch: str


class InternationalNumbers(Open, kw_only=True):
    account_id: str
    iban: str
    bic: str


class BacsNumbers(Open, kw_only=True):
    account_id: str
    account: str
    sort_code: str


class AuthNumbers(Open, kw_only=True):
    """The sandbox's institutions are in the US: ACH numbers only, the others empty."""

    ach: list[AchNumbers]
    eft: list[EftNumbers]
    international: list[InternationalNumbers]
    bacs: list[BacsNumbers]


class AuthAnswer(Accounts, kw_only=True):
    numbers: AuthNumbers


class Jwk(Open, kw_only=True):
    alg: choice("ES256")
    crv: choice("P-256")
    kid: str
    kty: choice("EC")
    use: choice("sig")
    x: str
    y: str
    created_at: of(int, "When the key was made (seconds since the epoch).")
    expired_at: of(int | None, "When it was retired: null, it is current.")


class VerificationKey(Answer, kw_only=True):
    key: Jwk


class WebhookFired(Answer, kw_only=True):
    webhook_fired: bool
