"""The hosted flow in Spanish (issue 33, point 6; real-service-facts 12: `language` `en`|`es`,
default `en`).

With `language: "es"` every screen, message and button of the flow is Spanish, its
aria-labels, titles and placeholders too, and the page's <html lang> says so from the
server's first byte; English stays the default and the key of the words
(simulator/domain/flow/flow_words.py). The browser tests walk the flow as
tests/test_sdk_browser.py does (its host page, sandbox and helpers) and look for English
left on each screen: any of the flow's English sentences in the text the user reads, and
any word that only the English flow uses, in the text, the hidden texts (screen-reader
status, closed hints) and the attributes a screen reader says. The unit tests check that
every text the flow's scripts say through t() has its Spanish, and back.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from calls import run_until_idle
from conftest import FEDEX, WALMART
from test_flow_look_browser import axe_blocking
from test_sdk_browser import (FLOW, events, host_url, on_screen, open_flow, page,  # noqa: F401
                              receiver, sandbox, shot, sign_in, started_task, token_of,
                              wait_for_event)

from payroll_sandbox.app import create_app
from payroll_sandbox.domain.flow import sdk
from payroll_sandbox.domain.flow.flow_words import (ENGLISH, LANGUAGES, SPANISH, flow_language,
                                               flow_page)
from payroll_sandbox.schemas.sdk import SDK_LANGUAGES
from payroll_sandbox.settings import Settings
from payroll_sandbox.static import static_text

STATIC = Path(static_text.__code__.co_filename).resolve().parent  # simulator/static
FLOW_SCRIPTS = sorted(STATIC.glob("flow*.js"))
NETFLIX = "6410a0000000000000000060"
PHONE = {"width": 390, "height": 844}
AT_WALMART = {"step": "login-company", "companyId": WALMART}

# The tests that reach a server run in the browser's event loop (conftest.browser).
browser_loop = pytest.mark.asyncio(loop_scope="session")


# -- what English looks like --------------------------------------------------------------------

ENGLISH_TEXTS = [*SPANISH, *sdk.FAILURE_SENTENCES.values(), *sdk.ERROR_SENTENCES.values(),
                 sdk.FALLBACK_SENTENCE]
SPANISH_TEXTS = [*SPANISH.values(), *sdk.FAILURE_SENTENCES_ES.values(),
                 *sdk.ERROR_SENTENCES_ES.values(), sdk.FALLBACK_SENTENCE_ES]
PLACEHOLDER = re.compile(r"\{(\w+)\}")
# Names that are the same in both languages: the product, the sandbox usernames.
NAMES = re.compile(r"payroll-sandbox|@?test(?:-[a-z]+)*-?(?:@test\.com)?|\.com")
WORD = re.compile(r"[^\W\d_]+")


def words_of(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(NAMES.sub(" ", PLACEHOLDER.sub(" ", text)))}


# Words only the English flow uses (a word both use, "app", "no", "PDF", proves nothing).
ENGLISH_ONLY = (set().union(*map(words_of, ENGLISH_TEXTS))
                - set().union(*map(words_of, SPANISH_TEXTS)))


def pattern_of(sentence: str) -> re.Pattern:
    parts = PLACEHOLDER.split(sentence)[::2]  # the text around the placeholders
    return re.compile(".+?".join(re.escape(part) for part in parts))


# The flow's English texts of three words or more, each as a pattern (a name in a placeholder).
ENGLISH_SENTENCES = {text: pattern_of(text) for text in ENGLISH_TEXTS
                     if len(WORD.findall(PLACEHOLDER.sub("", text))) >= 3}

# Everything the flow's page says to a user or a screen reader: its title, every text
# node (hidden ones too: sr-only status, a closed hint, the hidden title), and the
# aria-label, title, placeholder and alt attributes. Not the scripts (the bootstrap), nor
# companies' names (The Home Depot is no English left behind).
SAID = """body => {
  const parts = [document.title];
  const skip = 'script, style, .name, [data-testid=company-name]';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode: n => n.parentElement.closest(skip) ? NodeFilter.FILTER_REJECT
                                                   : NodeFilter.FILTER_ACCEPT });
  while (walker.nextNode()) { parts.push(walker.currentNode.nodeValue); }
  for (const node of document.querySelectorAll('[aria-label], [title], [placeholder], [alt]')) {
    for (const name of ['aria-label', 'title', 'placeholder', 'alt']) {
      if (node.hasAttribute(name)) { parts.push(node.getAttribute(name)); }
    }
  }
  return parts.join('\\n');
}"""


async def english_on_screen(flow) -> dict[str, list[str]]:
    """The English left on the flow's screen: sentences in the text the user reads, and
    English-only words anywhere the page says something (empty lists when none)."""
    visible = await flow.locator("body").inner_text()
    said = await flow.locator("body").evaluate(SAID)
    return {"sentences": [s for s, pattern in ENGLISH_SENTENCES.items() if pattern.search(visible)],
            "words": sorted(words_of(said) & ENGLISH_ONLY)}


async def assert_spanish(flow, screen_name: str) -> None:
    await on_screen(flow, screen_name)
    assert await flow.locator("html").evaluate("html => document.documentElement.lang") == "es"
    assert await english_on_screen(flow) == {"sentences": [], "words": []}, screen_name


def spanish(config: dict) -> dict:
    return {"language": "es", **config}


async def fits_a_phone(page, flow, name: str) -> None:
    """Spanish runs longer than English: on a phone nothing is wider than the screen."""
    overflow = await flow.locator("body").evaluate(
        "body => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow == 0, name
    await shot(page, f"sdk-es-{name}-phone")


# -- the flow, screen by screen -------------------------------------------------------------------

@browser_loop
async def test_spanish_flow_search_company_login_progress_and_success(page, sandbox):
    """language es, a deposit: search, the company, its login (and the hint, opened),
    progress while the task is queued, then success; each screen in Spanish. The host
    hears the same interaction names and finish payload as in English."""
    token = await token_of(sandbox, "spanish-happy")
    flow = await open_flow(page, {"publicToken": token, "language": "es",
                                  "tasks": [{"operation": "deposit"}]})
    assert await page.locator(FLOW).get_attribute("title") == "Conexión de nómina"
    await flow.locator("[data-testid=popular] [data-company]").first.wait_for()
    await assert_spanish(flow, "search")
    assert await flow.locator("h1").inner_text() == "Encuentra a tu empleador"
    assert await flow.get_by_test_id("search").get_attribute("placeholder") == \
        "Busca por nombre, p. ej., Walmart"
    assert await flow.locator("title").text_content() == \
        "Buscar empresa · Conecta tu nómina"

    await flow.get_by_test_id("search").fill("walmart")
    await flow.locator(f"[data-testid=results] [data-company='{WALMART}']").wait_for()
    await flow.locator("[role=status]", has_text="encontrada").wait_for()
    await assert_spanish(flow, "search")

    await flow.locator(f"[data-company='{WALMART}']").click()
    await assert_spanish(flow, "login")
    assert await flow.locator("h1").inner_text() == "Inicia sesión en Walmart"
    assert await flow.get_by_test_id("company-name").text_content() == "Walmart"
    assert await flow.get_by_label("Usuario").evaluate("node => node === document.activeElement")
    await flow.get_by_text("¿Estás probando? Usa un usuario de prueba").click()
    await assert_spanish(flow, "login")
    await shot(page, "sdk-es-login")
    assert await axe_blocking(page) == []

    await sign_in(flow, "test-good", "contraseña")
    task_id = await started_task(page)
    await assert_spanish(flow, "progress")
    assert await flow.locator("h1").inner_text() == "Conectando con Walmart"
    assert await flow.get_by_test_id("task-status").text_content() == "Conectando con Walmart…"
    assert await flow.locator("[data-step=connect]").get_attribute("aria-label") == \
        "Conectando con Walmart, en curso"

    await run_until_idle(sandbox)
    await assert_spanish(flow, "done")
    assert await flow.get_by_test_id("outcome").text_content() == "¡Todo listo!"
    assert await flow.get_by_test_id("done").text_content() == "Finalizar"
    assert await flow.get_by_test_id("outcome-detail").text_content() == \
        "Conectaste Walmart correctamente."
    assert await flow.locator("[data-step=update] .label").text_content() == \
        "Depósito directo actualizado"
    await shot(page, "sdk-es-done")
    assert await axe_blocking(page) == []

    await flow.get_by_test_id("done").dispatch_event("click")  # the frame goes away: no wait after
    assert (await wait_for_event(page, "finish"))["taskId"] == task_id
    names = [e["name"] for e in await events(page, "interaction")]
    assert "Viewed Login Page" in names and "Task Completed" in names  # the host's words


@browser_loop
async def test_spanish_flow_english_is_the_default_and_the_check_sees_it(page, sandbox):
    """No language: English, <html lang="en">, and the check above finds its English."""
    token = await token_of(sandbox, "spanish-default")
    flow = await open_flow(page, {"publicToken": token, "deeplink": AT_WALMART})
    await on_screen(flow, "login")
    assert await flow.locator("html").get_attribute("lang") == "en"
    assert await page.locator(FLOW).get_attribute("title") == "Payroll connection"
    english = await english_on_screen(flow)
    assert "Use the username and password you use at {company}." in english["sentences"]
    assert {"sign", "username", "password", "close"} <= set(english["words"])


@browser_loop
async def test_spanish_flow_failure_reads_the_spanish_sentence_and_its_next_steps(page, sandbox):
    """test-failure: the task fails (unknown-failure); the user reads its Spanish sentence
    and Spanish buttons; the host's close reason is the code, as in English."""
    token = await token_of(sandbox, "spanish-failure")
    flow = await open_flow(page, spanish({"publicToken": token, "tasks": [{"operation": "deposit"}],
                                          "deeplink": AT_WALMART}))
    await sign_in(flow, "test-failure")
    await run_until_idle(sandbox)
    await assert_spanish(flow, "done")
    assert await flow.get_by_test_id("outcome").text_content() == "No pudimos terminar"
    assert await flow.get_by_test_id("outcome-detail").text_content() == \
        sdk.FAILURE_SENTENCES_ES["unknown-failure"]
    assert await flow.get_by_test_id("retry").text_content() == "Intentar de nuevo"
    await shot(page, "sdk-es-failure")
    await flow.get_by_test_id("done").dispatch_event("click")
    assert (await wait_for_event(page, "close"))["reason"] == "unknown-failure"


@browser_loop
async def test_spanish_flow_wrong_password_is_refused_in_spanish(page, sandbox):
    token = await token_of(sandbox, "spanish-refused")
    flow = await open_flow(page, spanish({"publicToken": token, "deeplink": AT_WALMART}))
    await on_screen(flow, "login")
    await flow.get_by_test_id("submit").click()  # empty: asked inline
    await flow.get_by_test_id("login-error").filter(
        has_text="Ingresa tu usuario y tu contraseña.").wait_for()
    await flow.get_by_test_id("username").fill("test-bad")
    await flow.get_by_test_id("password").fill("mala")
    await flow.get_by_test_id("submit").click()
    await flow.get_by_test_id("login-error").filter(
        has_text=sdk.ERROR_SENTENCES_ES["credentials-refused"]).wait_for()
    await flow.get_by_test_id("submit").filter(has_text="Iniciar sesión").wait_for()
    await assert_spanish(flow, "login")


@browser_loop
async def test_spanish_flow_a_configuration_with_a_wrong_field_errs_in_spanish(page, sandbox):
    """A configuration the flow cannot run (`tasks` not a list) but whose language is es:
    the error screen is Spanish, and closes with invalid-config."""
    token = await token_of(sandbox, "spanish-invalid")
    flow = await open_flow(page, {"publicToken": token, "language": "es", "tasks": 5})
    await assert_spanish(flow, "error")
    assert await flow.locator("h1").inner_text() == "No podemos continuar"
    assert await flow.get_by_test_id("error").text_content() == \
        sdk.ERROR_SENTENCES_ES["invalid-config"]
    await flow.get_by_role("button", name="Cerrar").first.dispatch_event("click")
    assert (await wait_for_event(page, "close"))["reason"] == "invalid-config"


@browser_loop
async def test_spanish_flow_an_unreadable_configuration_stays_english(page, sandbox):
    """Not base64 of JSON: nothing says the language, so the page and its error are English."""
    origin = str(sandbox.server.make_url("/")).rstrip("/")
    await page.goto(f"{origin}/initialize/not*base64")
    await page.locator("#app[data-screen='error']").wait_for()
    assert await page.evaluate("() => document.documentElement.lang") == "en"
    assert await page.get_by_test_id("error").text_content() == \
        sdk.ERROR_SENTENCES["invalid-config"]


@pytest.mark.parametrize(("username", "screen_name", "heading", "prompt", "step"), [
    ("test-code-mfa", "mfa-code", "Ingresa tu código de verificación",
     "Ingresa el código de 6 dígitos que enviamos a tu teléfono.", "Verificando tu código"),
    ("test-question-mfa", "security-question", "Responde tu pregunta de seguridad",
     "¿Cómo se llamaba tu primera mascota?", "Verificando tu identidad"),
])
@browser_loop
async def test_spanish_flow_mfa_screens(page, sandbox, username, screen_name, heading, prompt,
                                        step):
    await page.set_viewport_size(PHONE)
    token = await token_of(sandbox, f"spanish-{screen_name}")
    flow = await open_flow(page, spanish({"publicToken": token, "deeplink": AT_WALMART}))
    await on_screen(flow, "login")
    await flow.get_by_test_id("username").fill(username)
    await flow.get_by_test_id("password").fill("secreta")
    await flow.get_by_test_id("submit").click()
    await assert_spanish(flow, screen_name)
    assert await flow.locator("h1").inner_text() == heading
    assert prompt in await flow.locator("form").inner_text()
    await flow.get_by_test_id("mfa-submit").click()  # empty: asked again, inline
    await flow.get_by_test_id("mfa-error").filter(has_text="Ingresa").wait_for()
    await assert_spanish(flow, screen_name)
    await fits_a_phone(page, flow, screen_name)
    await flow.get_by_test_id("mfa-answer").fill("123456")
    await flow.get_by_test_id("mfa-submit").click()
    await assert_spanish(flow, "progress")
    assert await flow.locator("[data-step=mfa] .label").text_content() == step


@pytest.mark.parametrize(("config", "screen_name", "heading"), [
    ({"deeplink": {"step": "welcome"}}, "welcome", "Conecta tu cuenta de nómina"),
    ({"deeplink": {"step": "search-payroll"}}, "search", "Encuentra tu proveedor de nómina"),
    ({"deeplink": {"step": "account"}}, "account", "Tus cuentas conectadas"),
    ({"deeplink": {"step": "direct-deposit-setup", "companyId": WALMART}}, "direct-deposit-setup",
     "Depósito directo en Walmart"),
    ({"deeplink": {"step": "manual-fallback", "companyId": WALMART}}, "manual-fallback",
     "Actualiza tu depósito en Walmart"),
    ({"deeplink": {"step": "generate-deposit-pdf", "companyId": WALMART}}, "generate-deposit-pdf",
     "Formulario de depósito para Walmart"),
    ({"scope": "pay-link", "tasks": [{"operation": "switch"}],
      "deeplink": {"step": "add-card", "companyId": NETFLIX}}, "add-card", "Agrega una tarjeta"),
    ({"deeplink": {"step": "login-company", "companyId": FEDEX}}, "unavailable",
     "No se puede conectar con FedEx"),
])
@browser_loop
async def test_spanish_flow_deeplinked_screens(page, sandbox, config, screen_name, heading):
    await page.set_viewport_size(PHONE)
    token = await token_of(sandbox, f"spanish-{screen_name}")
    flow = await open_flow(page, spanish({"publicToken": token, **config}))
    await assert_spanish(flow, screen_name)
    assert await flow.locator("h1").inner_text() == heading
    await fits_a_phone(page, flow, screen_name)
    if screen_name == "direct-deposit-setup":
        how_much = flow.get_by_label("¿Cuánto de tu pago debe ir a esta cuenta?")
        await how_much.select_option("percent")
        await flow.get_by_test_id("continue").click()
        await flow.get_by_test_id("distribution-error").filter(has_text="porcentaje").wait_for()
        await assert_spanish(flow, screen_name)
    if screen_name == "add-card":
        await flow.get_by_test_id("continue").click()
        await flow.get_by_test_id("card-error").filter(has_text="tarjeta").wait_for()
        assert await flow.get_by_test_id("card-expiry").get_attribute("placeholder") == "MM/AA"
        await assert_spanish(flow, screen_name)


# -- every word has its Spanish -------------------------------------------------------------------

def literal_texts(code: str) -> list[str]:
    """The strings of `code`'s double-quoted literals, joined where `+` joins them."""
    literal = r'"(?:[^"\\]|\\.)*"'
    return ["".join(json.loads(part) for part in re.findall(literal, joined))
            for joined in re.findall(rf"{literal}(?:\s*\+\s*{literal})*", code)]


def said_through_t(code: str) -> set[str]:
    """The English texts `code` says through t("...") (a literal, or literals joined by +)."""
    literal = r'"(?:[^"\\]|\\.)*"'
    calls = re.findall(rf"(?<![\w.$])t\(\s*({literal}(?:\s*\+\s*{literal})*)", code)
    return {text for call in calls for text in literal_texts(call)}


SCREEN_TITLE = r'(?:[\w.!]+\s*\?\s*)?"[^"]*"(?:\s*:\s*"[^"]*")?'  # a literal, or a choice of two
SCREEN_CALL = re.compile(rf"(?<![\w.])screen\([^,]*,\s*({SCREEN_TITLE})\s*,\s*\[")


def screen_titles(code: str) -> set[str]:
    """The titles `code` gives screen(name, title, [...]): flow-ui.js says them through t()."""
    calls = len(re.findall(r"(?<![\w.])screen\(", code)) - code.count("function screen(")
    found = SCREEN_CALL.findall(code)
    assert len(found) == calls, "a screen's title is neither a literal nor a choice of two"
    return {text for title in found for text in literal_texts(title)}


def flow_page_texts() -> set[str]:
    """flow.html's own texts (between tags, and its aria-labels), as flow_page finds them."""
    html = static_text("flow.html")
    return {m[1] for m in re.finditer(r'(?:>|aria-label=")([^<>"]+)(?=[<"])', html)
            if m[1].strip() and m[1] != "__BOOTSTRAP__"}


def everything_the_flow_says() -> set[str]:
    code = "\n".join(path.read_text(encoding="utf-8") for path in FLOW_SCRIPTS)
    prompts = {challenge.prompt for challenge in sdk.MFA_CHALLENGES.values()}
    return said_through_t(code) | screen_titles(code) | flow_page_texts() | prompts


def test_spanish_words_every_text_the_flow_says_has_its_spanish():
    said = everything_the_flow_says()
    assert {"Sign in to {company}", "Login", "Loading…"} <= said  # the scan finds each kind
    assert sorted(said - set(SPANISH)) == []


def test_spanish_words_the_dictionary_holds_nothing_the_flow_never_says():
    assert sorted(set(SPANISH) - everything_the_flow_says()) == []


def test_spanish_words_keep_the_placeholders_of_their_english():
    for english, translated in SPANISH.items():
        assert set(PLACEHOLDER.findall(english)) == set(PLACEHOLDER.findall(translated)), english
        assert translated.strip(), english


def test_spanish_sentences_twin_every_failure_and_error_sentence():
    for english, translated in ((sdk.FAILURE_SENTENCES, sdk.FAILURE_SENTENCES_ES),
                                (sdk.ERROR_SENTENCES, sdk.ERROR_SENTENCES_ES)):
        assert sorted(english) == sorted(translated)
        for code, sentence in english.items():
            placeholders = set(PLACEHOLDER.findall(translated[code]))
            assert set(PLACEHOLDER.findall(sentence)) == placeholders, code
    assert len(set(sdk.FAILURE_SENTENCES_ES.values())) == len(sdk.FAILURE_SENTENCES_ES)


def test_spanish_user_messages_carry_the_words_only_in_spanish():
    english = sdk.user_messages()
    assert english == {"reasons": sdk.FAILURE_SENTENCES, "errors": sdk.ERROR_SENTENCES,
                       "fallback": sdk.FALLBACK_SENTENCE}
    assert sdk.user_messages("en") == english
    assert sdk.user_messages("fr") == english
    assert sdk.user_messages("es") == {"reasons": sdk.FAILURE_SENTENCES_ES,
                                       "errors": sdk.ERROR_SENTENCES_ES,
                                       "fallback": sdk.FALLBACK_SENTENCE_ES, "words": SPANISH}


def test_spanish_flow_page_is_translated_before_the_first_paint():
    template = static_text("flow.html")
    assert flow_page(template, ENGLISH) == template
    page_es = flow_page(template, "es")
    assert '<html lang="es">' in page_es and "__BOOTSTRAP__" in page_es
    assert [text for text in flow_page_texts() if text in page_es] == []
    assert "<title>Conecta tu nómina</title>" in page_es


async def test_spanish_page_language_follows_the_configuration_and_english_is_the_default():
    def encoded(config) -> str:
        return base64.b64encode(json.dumps(config).encode()).decode()

    async with TestClient(TestServer(create_app(Settings()))) as client:
        async def language(config: str) -> str:
            page = await (await client.get(f"/initialize/{config}")).text()
            return re.search(r'<html lang="(\w+)">', page).group(1)

        assert await language(encoded({"language": "es"})) == "es"
        assert await language(encoded({"language": "es", "tasks": 5})) == "es"  # errs in Spanish
        assert await language(encoded({"language": "fr"})) == "en"
        assert await language(encoded({})) == "en"
        assert await language("not*base64") == "en"
    assert flow_language(None) == flow_language({"language": ["es"]}) == "en"


def test_spanish_languages_are_the_ones_the_configuration_schema_accepts():
    assert tuple(SDK_LANGUAGES) == LANGUAGES
