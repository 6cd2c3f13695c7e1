"""The hosted flow's own words in the user's language (spec: Client SDK configuration,
`language` `en`|`es`, default `en`; real-service-facts 12).

The flow's scripts write their texts in English and pass each through `t()`
(static/flow-ui.js); the page gets the translations below only when its configuration
asks for Spanish, keyed by that English text, so the English page carries nothing more.
`{company}`-style placeholders stand where a sentence names something, so a translation
puts the name where its own grammar wants it. The sentences of failures and errors are
domain/sdk.py's (FAILURE_SENTENCES and their Spanish twins); flow.html's few texts are
here too, translated by the server before the first paint.

Spanish: neutral Latin-American, "tú" throughout, as US fintech apps write it.
"""

from __future__ import annotations

import re
from typing import Any

ENGLISH = "en"

SPANISH = {
    # flow.html
    "Connect your payroll": "Conecta tu nómina",
    "Sandbox": "Modo de prueba",
    "Loading…": "Cargando…",
    "Secure connection · payroll-sandbox": "Conexión segura · payroll-sandbox",

    # flow-ui.js: the frame every screen shares, the names a sentence falls back to
    "Back": "Atrás",
    "Close": "Cerrar",
    "Please wait…": "Espera un momento…",
    "the company": "la empresa",
    "another provider": "otro proveedor",
    # the exit prompt
    "Are you sure you want to exit?": "¿Seguro que quieres salir?",
    "Your connection is still in progress. If you exit now, it carries on without you and "
    "you won't see how it ends.":
        "Tu conexión sigue en curso. Si sales ahora, continuará sin ti y no verás cómo "
        "termina.",
    "You haven't finished connecting. Your progress will be lost.":
        "Todavía no terminas de conectarte. Se perderá tu progreso.",
    "Keep going": "Seguir aquí",
    "Exit": "Salir",

    # flow-company.js: the error screen, the welcome, the search, a refusal
    "Something went wrong": "Algo salió mal",
    "We can't continue": "No podemos continuar",
    "Welcome": "Te damos la bienvenida",
    "Private and secure": "Privado y seguro",
    "You sign in with your employer or payroll provider; the app never sees your password.":
        "Inicias sesión con tu empleador o proveedor de nómina; la app nunca ve tu contraseña.",
    "Quick": "Rápido",
    "It usually takes less than a minute.": "Por lo general, toma menos de un minuto.",
    "In your control": "Tú tienes el control",
    "You can disconnect this at any time.": "Puedes desconectarlo cuando quieras.",
    "Connect your payroll account": "Conecta tu cuenta de nómina",
    "Sign in to your employer or payroll provider to continue.":
        "Inicia sesión con tu empleador o proveedor de nómina para continuar.",
    "Continue": "Continuar",
    "Payroll provider": "Proveedor de nómina",
    "Gig economy": "Economía colaborativa",
    "All locations": "Todas las sucursales",
    "Set up by hand": "Configuración manual",
    "Under maintenance": "En mantenimiento",
    "Popular": "Populares",
    "Popular employers": "Empleadores populares",
    "Payroll providers": "Proveedores de nómina",
    "For example, ADP": "Por ejemplo, ADP",
    "Search by name, e.g. {company}": "Busca por nombre, p. ej., {company}",
    "Results": "Resultados",
    "Start typing to find your company.": "Empieza a escribir para encontrar tu empresa.",
    "No company found. Check the spelling, or try the name of your payroll provider.":
        "No encontramos ninguna empresa. Revisa cómo lo escribiste o prueba con el nombre de "
        "tu proveedor de nómina.",
    "Search payroll providers instead": "Buscar entre proveedores de nómina",
    "{count} company found": "{count} empresa encontrada",
    "{count} companies found": "{count} empresas encontradas",
    "No company found": "No se encontró ninguna empresa",
    "Find your payroll provider": "Encuentra tu proveedor de nómina",
    "Find the company you pay": "Encuentra la empresa a la que le pagas",
    "Find your employer": "Encuentra a tu empleador",
    "The company that runs payroll for your employer.":
        "La empresa que gestiona la nómina de tu empleador.",
    "Search for the company whose bill you want to update.":
        "Busca la empresa cuya factura quieres actualizar.",
    "Search for the company that pays you, or your payroll provider.":
        "Busca la empresa que te paga o tu proveedor de nómina.",
    "Search Payroll": "Buscar proveedor de nómina",
    "Search Company": "Buscar empresa",
    "Search for your payroll provider": "Busca tu proveedor de nómina",
    "Search for the company": "Busca la empresa",
    "Search for your employer": "Busca a tu empleador",
    "Choose another company": "Elegir otra empresa",
    "Unavailable": "No disponible",
    "Can't connect to {company}": "No se puede conectar con {company}",

    # flow-signin.js: the login form, its hint, the second step
    "signs in and succeeds": "inicia sesión y todo sale bien",
    "wrong password: the sign-in is refused here":
        "contraseña incorrecta: el inicio de sesión se rechaza aquí",
    "signs in, then the update fails": "inicia sesión y luego la actualización falla",
    "asks for a verification code": "pide un código de verificación",
    "asks a security question": "hace una pregunta de seguridad",
    "signs in, then the deposit fails: the payroll system can't set it up":
        "inicia sesión y luego el depósito falla: el sistema de nómina no puede configurarlo",
    "Testing? Use a sandbox username": "¿Estás probando? Usa un usuario de prueba",
    "Any password and any verification answer work. You can add @test.com to a username. "
    "test- followed by a scenario name runs that scenario.":
        "Funciona cualquier contraseña y cualquier respuesta de verificación. Puedes agregar "
        "@test.com a un usuario. test- seguido del nombre de un escenario ejecuta ese escenario.",
    "Signing in…": "Iniciando sesión…",
    "Sign in": "Iniciar sesión",
    "Sign in to {company}": "Inicia sesión en {company}",
    "Username": "Usuario",
    "Password": "Contraseña",
    "Enter your username and password.": "Ingresa tu usuario y tu contraseña.",
    "Login": "Inicio de sesión",
    "Use the username and password you use at {company}.":
        "Usa el usuario y la contraseña que usas en {company}.",
    "Checking…": "Verificando…",
    "Verify": "Verificar",
    "Verification code": "Código de verificación",
    "Enter the code.": "Ingresa el código.",
    "Enter your answer.": "Ingresa tu respuesta.",
    "Verification": "Verificación",
    "Security Question": "Pregunta de seguridad",
    "Enter your verification code": "Ingresa tu código de verificación",
    "Answer your security question": "Responde tu pregunta de seguridad",
    "For your security, {company} needs one more step.":
        "Por tu seguridad, {company} necesita un paso más.",
    "{company} asks one of your security questions to make sure it's you.":
        "{company} te hace una de tus preguntas de seguridad para confirmar que eres tú.",
    "Signing in to {company}": "Iniciando sesión en {company}",
    # The sandbox's MFA prompts (domain/sdk.py MFA_CHALLENGES), shown as they come.
    "Enter the 6-digit code we sent to your phone.":
        "Ingresa el código de 6 dígitos que enviamos a tu teléfono.",
    "What was the name of your first pet?": "¿Cómo se llamaba tu primera mascota?",

    # flow-progress.js: the steps of the task, the last screen
    "Updating your direct deposit": "Actualizando tu depósito directo",
    "Direct deposit updated": "Depósito directo actualizado",
    "Getting your income and employment": "Obteniendo tus datos de ingresos y empleo",
    "Income and employment received": "Datos de ingresos y empleo recibidos",
    "Updating your payment method": "Actualizando tu método de pago",
    "Payment method updated": "Método de pago actualizado",
    "Getting your account details": "Obteniendo los datos de tu cuenta",
    "Account details received": "Datos de la cuenta recibidos",
    "Getting your identity details": "Obteniendo tus datos de identidad",
    "Identity details received": "Datos de identidad recibidos",
    "Getting your tax documents": "Obteniendo tus documentos fiscales",
    "Tax documents received": "Documentos fiscales recibidos",
    "Your pay goes to your new account from your next paycheck.":
        "A partir de tu próximo pago, tu sueldo se depositará en tu nueva cuenta.",
    "Your income and employment details are on their way to the app.":
        "Tus datos de ingresos y empleo ya van en camino a la app.",
    "Your new payment method is set.": "Tu nuevo método de pago quedó configurado.",
    "Your account details are on their way to the app.":
        "Los datos de tu cuenta ya van en camino a la app.",
    "Your identity details are on their way to the app.":
        "Tus datos de identidad ya van en camino a la app.",
    "Your tax documents are on their way to the app.":
        "Tus documentos fiscales ya van en camino a la app.",
    "Finishing the update": "Terminando la actualización",
    "Update finished": "Actualización terminada",
    "Connecting to {company}": "Conectando con {company}",
    "Connected to {company}": "Conexión establecida con {company}",
    "Couldn't connect to {company}": "No se pudo conectar con {company}",
    "Signing in": "Iniciando sesión",
    "Signed in": "Sesión iniciada",
    "Couldn't sign in": "No se pudo iniciar sesión",
    "Checking your code": "Verificando tu código",
    "Verifying your identity": "Verificando tu identidad",
    "Identity verified": "Identidad verificada",
    "Couldn't verify your identity": "No se pudo verificar tu identidad",
    "Couldn't finish the update": "No se pudo terminar la actualización",
    "Finishing up": "Finalizando",
    "All done": "Terminado",
    "Not finished": "Sin terminar",
    "Steps": "Pasos",
    "{step}, done": "{step}, completado",
    "{step}, didn't finish": "{step}, no se completó",
    "{step}, in progress": "{step}, en curso",
    "Connection progress": "Progreso de la conexión",
    "Connecting": "Conectando",
    "Task {number} of {total}": "Tarea {number} de {total}",
    "This is taking longer than usual": "Esto está tardando más de lo normal",
    "You can keep waiting, or close this window: the connection carries on and the app tells "
    "you how it ends.":
        "Puedes seguir esperando o cerrar esta ventana: la conexión continúa y la app te dirá "
        "cómo termina.",
    "Close and carry on": "Cerrar y dejar que continúe",
    "This usually takes less than a minute. Please keep this window open.":
        "Por lo general, toma menos de un minuto. Mantén esta ventana abierta.",
    "Success": "Conexión exitosa",
    "You're all set": "¡Todo listo!",
    "{company} is connected.": "Conectaste {company} correctamente.",
    "Done": "Finalizar",
    "Try again": "Intentar de nuevo",
    "Use another card": "Usar otra tarjeta",
    "Set up manually": "Configurar manualmente",
    "Choose another amount": "Elegir otro monto",
    "Not Connected": "Sin conexión",
    "We couldn't finish": "No pudimos terminar",

    # flow-deeplink.js: accounts, the deposit split, manual instructions, the form, a card
    "Connected": "Conectada",
    "Needs you to sign in again": "Debes volver a iniciar sesión",
    "Account": "Cuenta",
    "Your connected accounts": "Tus cuentas conectadas",
    "Connected accounts": "Cuentas conectadas",
    "No connected account yet.": "Todavía no tienes cuentas conectadas.",
    "Connect another": "Conectar otra",
    "My entire paycheck": "Todo mi cheque de pago",
    "A percentage of my paycheck": "Un porcentaje de mi cheque de pago",
    "A fixed amount per paycheck": "Un monto fijo por cheque de pago",
    "Amount": "Monto",
    "Percentage (1 to 100)": "Porcentaje (de 1 a 100)",
    "Amount in dollars": "Monto en dólares",
    "How much of your pay should go to this account?":
        "¿Cuánto de tu pago debe ir a esta cuenta?",
    "Enter a percentage from 1 to 100.": "Ingresa un porcentaje de 1 a 100.",
    "Enter an amount greater than zero.": "Ingresa un monto mayor que cero.",
    "Direct Deposit": "Depósito directo",
    "Direct deposit at {company}": "Depósito directo en {company}",
    "Choose how much of each paycheck goes to your account.":
        "Elige cuánto de cada cheque de pago va a tu cuenta.",
    "Ask {company}'s payroll team (or your HR portal) how to change your direct deposit.":
        "Pregúntale al equipo de nómina de {company} (o consulta tu portal de Recursos "
        "Humanos) cómo cambiar tu depósito directo.",
    "Give them your account and routing numbers, or a signed direct deposit form.":
        "Dales tus números de cuenta y de ruta, o un formulario de depósito directo firmado.",
    "Check your next pay stub to see that the change is in place.":
        "Revisa tu próximo talón de pago para confirmar que el cambio se aplicó.",
    "Manual Instructions": "Instrucciones manuales",
    "Update your deposit at {company}": "Actualiza tu depósito en {company}",
    "You can make this change with {company} directly. Give your employer's payroll team "
    "your account and routing numbers, or a direct deposit form.":
        "Puedes hacer este cambio directamente con {company}. Dale al equipo de nómina de tu "
        "empleador tus números de cuenta y de ruta, o un formulario de depósito directo.",
    "{company} can't be connected online. Give your employer's payroll team your account "
    "and routing numbers, or a direct deposit form.":
        "No es posible conectar {company} en línea. Dale al equipo de nómina de tu empleador "
        "tus números de cuenta y de ruta, o un formulario de depósito directo.",
    "Get a deposit form": "Obtener un formulario de depósito",
    "Download the form (PDF)": "Descargar el formulario (PDF)",
    "Deposit Form": "Formulario de depósito",
    "Deposit form for {company}": "Formulario de depósito para {company}",
    "Fill in your account details, sign the form, and hand it to {company}'s payroll team.":
        "Completa los datos de tu cuenta, firma el formulario y entrégalo al equipo de nómina "
        "de {company}.",
    "MM/YY": "MM/AA",
    "Card number": "Número de tarjeta",
    "Expiry date (MM/YY)": "Fecha de vencimiento (MM/AA)",
    "Check the card number and expiry date.":
        "Revisa el número de tarjeta y la fecha de vencimiento.",
    "Add Card": "Agregar tarjeta",
    "Add a card": "Agrega una tarjeta",
    "The card you want {company} to charge.":
        "La tarjeta a la que quieres que {company} haga los cargos.",
    "The card you want to pay with.": "La tarjeta con la que quieres pagar.",
}

# Each language but English: its translations of the flow's words, keyed by their English.
WORDS = {"es": SPANISH}
LANGUAGES = (ENGLISH, *WORDS)


def flow_language(config: Any) -> str:
    """The language the flow speaks: the configuration's `language` when the sandbox has it,
    else English (no configuration, an unreadable one, a value the schema refuses)."""
    language = config.get("language") if isinstance(config, dict) else None
    return language if language in LANGUAGES else ENGLISH


# A text between two tags, or an aria-label's value: flow.html's words are whole ones.
_PAGE_TEXT = re.compile(r'(>|aria-label=")([^<>"]+)(?=[<"])')


def flow_page(template: str, language: str) -> str:
    """flow.html in `language`: its <html lang> and, besides English, its own texts (title,
    dialog label, badge, loading line, footer), so its first paint is in that language."""
    page = template.replace('<html lang="en">', f'<html lang="{language}">', 1)
    words = WORDS.get(language)
    if not words:
        return page
    return _PAGE_TEXT.sub(lambda m: m[1] + words.get(m[2], m[2]), page)
