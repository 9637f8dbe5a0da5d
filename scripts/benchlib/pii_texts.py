"""The ordinary words around planted values, per locale of scripts/benchlib/pii_values.py:
sentence frames, field labels, business filler, chat lines, greetings and closings, and
digits spelled as words (what a caller dictating a number says).

Written for this benchmark in each language; the frames hold `{v}` (the value) and
`{label}` (what the field is called there).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Texts:
    person_frames: tuple[str, ...]
    value_frames: tuple[str, ...]  # the first is "{label}: {v}"
    labels: dict[str, str]
    filler: tuple[str, ...]
    chat: tuple[str, ...]
    greeting: str
    closing: str
    title: str
    digit_words: tuple[str, ...]
    at_dot: tuple[str, str] | None = None  # "@" and "." in words, where the language has its own
    joiner: str = " "  # between spelled digits


EN_LABELS = {"person": "name", "person_own": "name", "email": "e-mail",
             "phone": "phone number", "card": "card number", "iban": "IBAN", "us_ssn": "SSN",
             "de_tax_id": "tax id", "br_cpf": "CPF", "br_cnpj": "CNPJ",
             "in_aadhaar": "Aadhaar number", "cn_resident_id": "resident id",
             "kr_rrn": "resident registration number", "ru_passport": "passport",
             "secret": "API key"}

TEXTS = {
    "en": Texts(
        ("The ticket was opened by {v} on Monday.", "Escalated to {v}; waiting for an answer.",
         "Contact person: {v}"),
        ("{label}: {v}", "Please update the {label} to {v} in the CRM.",
         "The customer gave {v} as their {label} on the call.", "Noted during the call: {v}"),
        EN_LABELS,
        ("The nightly export finished late because the warehouse sync was slow.",
         "We will review the dashboard changes in Thursday's meeting."),
        ("hi, the export is stuck again", "looking now", "thanks, closing the ticket"),
        "Dear {v},", "Best regards,", "Account update",
        ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
        (" at ", " dot ")),
    "de": Texts(
        ("Das Ticket wurde am Montag von {v} eröffnet.",
         "An {v} eskaliert; wir warten auf Antwort.", "Ansprechpartner: {v}"),
        ("{label}: {v}", "Bitte die {label} im CRM auf {v} ändern.",
         "Der Kunde hat am Telefon {v} als {label} angegeben.",
         "Notiert während des Anrufs: {v}"),
        EN_LABELS | {"person": "Name", "email": "E-Mail-Adresse", "phone": "Telefonnummer",
                     "card": "Kartennummer", "de_tax_id": "Steuer-ID",
                     "secret": "API-Schlüssel"},
        ("Der nächtliche Export lief spät, weil die Lagersynchronisation langsam war.",
         "Die Änderungen am Dashboard besprechen wir im Meeting am Donnerstag."),
        ("hallo, der Export hängt schon wieder", "schaue gerade",
         "danke, ich schließe das Ticket"),
        "Hallo {v},", "Mit freundlichen Grüßen", "Kontoänderung",
        ("null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"),
        (" at ", " punkt ")),
    "pt-BR": Texts(
        ("O chamado foi aberto por {v} na segunda-feira.",
         "Escalado para {v}; aguardando resposta.", "Contato: {v}"),
        ("{label}: {v}", "Por favor, atualize o campo {label} no CRM para {v}.",
         "O cliente informou {v} como {label} na ligação.", "Anotado durante a ligação: {v}"),
        EN_LABELS | {"person": "nome", "phone": "telefone", "card": "número do cartão",
                     "secret": "chave de API"},
        ("A exportação noturna terminou tarde porque a sincronização do estoque estava lenta.",
         "Vamos revisar as mudanças do painel na reunião de quinta-feira."),
        ("oi, a exportação travou de novo", "olhando agora", "valeu, fechando o chamado"),
        "Olá, {v},", "Atenciosamente,", "Atualização de cadastro",
        ("zero", "um", "dois", "três", "quatro", "cinco", "seis", "sete", "oito", "nove"),
        (" arroba ", " ponto ")),
    "es": Texts(
        ("El ticket lo abrió {v} el lunes.", "Escalado a {v}; esperando respuesta.",
         "Persona de contacto: {v}"),
        ("{label}: {v}", "Por favor, actualice el campo {label} en el CRM a {v}.",
         "El cliente dio {v} como {label} en la llamada.", "Anotado durante la llamada: {v}"),
        EN_LABELS | {"person": "nombre", "email": "correo electrónico", "phone": "teléfono",
                     "card": "número de tarjeta", "secret": "clave de API"},
        ("La exportación nocturna terminó tarde porque la sincronización del almacén fue lenta.",
         "Revisaremos los cambios del panel en la reunión del jueves."),
        ("hola, la exportación se atascó otra vez", "lo miro ahora",
         "gracias, cierro el ticket"),
        "Hola, {v}:", "Saludos cordiales,", "Actualización de cuenta",
        ("cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve"),
        (" arroba ", " punto ")),
    "fr": Texts(
        ("Le ticket a été ouvert par {v} lundi.", "Escaladé à {v} ; en attente de réponse.",
         "Contact : {v}"),
        ("{label} : {v}", "Merci de mettre à jour le champ {label} dans le CRM : {v}.",
         "Le client a donné {v} comme {label} lors de l'appel.", "Noté pendant l'appel : {v}"),
        EN_LABELS | {"person": "nom", "email": "adresse e-mail",
                     "phone": "numéro de téléphone", "card": "numéro de carte",
                     "secret": "clé d'API"},
        ("L'export nocturne a fini tard car la synchronisation de l'entrepôt était lente.",
         "Nous reverrons les changements du tableau de bord à la réunion de jeudi."),
        ("salut, l'export est encore bloqué", "je regarde", "merci, je ferme le ticket"),
        "Bonjour {v},", "Cordialement,", "Mise à jour du compte",
        ("zéro", "un", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf"),
        (" arobase ", " point ")),
    "hi-IN": Texts(
        ("यह टिकट सोमवार को {v} ने खोला था।", "{v} को एस्केलेट किया गया; जवाब का इंतज़ार है।",
         "संपर्क व्यक्ति: {v}"),
        ("{label}: {v}", "कृपया CRM में {label} को {v} पर अपडेट करें।",
         "ग्राहक ने कॉल पर {label} {v} बताया।", "कॉल के दौरान नोट किया गया: {v}"),
        EN_LABELS | {"person": "नाम", "email": "ईमेल", "phone": "फ़ोन नंबर",
                     "card": "कार्ड नंबर", "in_aadhaar": "आधार नंबर", "secret": "API कुंजी"},
        ("गोदाम सिंक धीमा होने से रात का एक्सपोर्ट देर से पूरा हुआ।",
         "डैशबोर्ड के बदलावों की समीक्षा गुरुवार की बैठक में होगी।"),
        ("नमस्ते, एक्सपोर्ट फिर से अटक गया है", "अभी देख रहा हूँ", "धन्यवाद, टिकट बंद कर रहा हूँ"),
        "नमस्ते {v} जी,", "धन्यवाद,", "खाता अपडेट",
        ("शून्य", "एक", "दो", "तीन", "चार", "पाँच", "छह", "सात", "आठ", "नौ"),
        (" एट ", " डॉट ")),
    "ar": Texts(
        ("فتح {v} هذه التذكرة يوم الاثنين.", "تم التصعيد إلى {v}؛ بانتظار الرد.",
         "جهة الاتصال: {v}"),
        ("{label}: {v}", "يرجى تحديث {label} في نظام CRM إلى {v}.",
         "ذكر العميل أن {label} هو {v} أثناء المكالمة.", "تم تدوينه أثناء المكالمة: {v}"),
        EN_LABELS | {"person": "الاسم", "person_own": "الاسم", "email": "البريد الإلكتروني",
                     "phone": "رقم الهاتف", "card": "رقم البطاقة", "iban": "رقم الآيبان",
                     "secret": "مفتاح API"},
        ("انتهى التصدير الليلي متأخرًا لأن مزامنة المستودع كانت بطيئة.",
         "سنراجع تغييرات لوحة المعلومات في اجتماع الخميس."),
        ("مرحبًا، التصدير متوقف مرة أخرى", "أتحقق الآن", "شكرًا، سأغلق التذكرة"),
        "عزيزي {v}،", "مع خالص التحيات،", "تحديث الحساب",
        ("صفر", "واحد", "اثنان", "ثلاثة", "أربعة", "خمسة", "ستة", "سبعة", "ثمانية", "تسعة")),
    "zh-CN": Texts(
        ("该工单由{v}于周一创建。", "已升级给{v}，等待回复。", "联系人：{v}"),
        ("{label}：{v}", "请在CRM中将{label}更新为{v}。", "客户在电话中提供的{label}是{v}。",
         "通话记录：{v}"),
        EN_LABELS | {"person": "姓名", "person_own": "姓名", "email": "电子邮箱",
                     "phone": "电话号码", "card": "银行卡号", "cn_resident_id": "身份证号",
                     "secret": "API密钥"},
        ("由于仓库同步较慢，夜间导出完成得较晚。", "我们将在周四的会议上评审仪表盘的改动。"),
        ("你好，导出又卡住了", "正在看", "谢谢，我来关闭工单"),
        "{v}，您好：", "此致", "账户信息更新",
        ("零", "一", "二", "三", "四", "五", "六", "七", "八", "九"), None, ""),
    "ja": Texts(
        ("このチケットは月曜日に{v}さんが起票しました。",
         "{v}さんにエスカレーション済み、返信待ちです。", "担当者：{v}"),
        ("{label}：{v}", "CRMの{label}を{v}に更新してください。",
         "お客様は電話で{label}として{v}を伝えました。", "通話中のメモ：{v}"),
        EN_LABELS | {"person": "氏名", "person_own": "氏名", "email": "メールアドレス",
                     "phone": "電話番号", "card": "カード番号", "secret": "APIキー"},
        ("倉庫の同期が遅かったため、夜間エクスポートの完了が遅れました。",
         "ダッシュボードの変更は木曜日の会議でレビューします。"),
        ("お疲れさまです、エクスポートがまた止まっています", "今見ています",
         "ありがとうございます、チケットを閉じます"),
        "{v}様", "よろしくお願いいたします。", "アカウント情報の更新",
        ("〇", "一", "二", "三", "四", "五", "六", "七", "八", "九"),
        ("アットマーク", "ドット"), ""),
    "ko": Texts(
        ("이 티켓은 월요일에 {v} 님이 등록했습니다.",
         "{v} 님에게 에스컬레이션했으며 답변을 기다리는 중입니다.", "담당자: {v}"),
        ("{label}: {v}", "CRM의 {label}을(를) {v}(으)로 변경해 주세요.",
         "고객이 통화 중 {label}로 {v}을(를) 알려 주었습니다.", "통화 중 메모: {v}"),
        EN_LABELS | {"person": "이름", "person_own": "이름", "email": "이메일",
                     "phone": "전화번호", "card": "카드 번호", "kr_rrn": "주민등록번호",
                     "secret": "API 키"},
        ("창고 동기화가 느려서 야간 내보내기가 늦게 끝났습니다.",
         "대시보드 변경 사항은 목요일 회의에서 검토하겠습니다."),
        ("안녕하세요, 내보내기가 또 멈췄어요", "지금 보고 있어요", "감사합니다, 티켓 닫을게요"),
        "{v} 님께,", "감사합니다.", "계정 정보 변경",
        ("공", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구"), (" 골뱅이 ", " 점 ")),
    "ru": Texts(
        ("Тикет открыл(а) {v} в понедельник.", "Передано {v}; ждём ответа.",
         "Контактное лицо: {v}"),
        ("{label}: {v}", "Пожалуйста, обновите {label} в CRM на {v}.",
         "Клиент назвал {v} как {label} во время звонка.", "Записано во время звонка: {v}"),
        EN_LABELS | {"person": "имя", "person_own": "имя", "email": "электронная почта",
                     "phone": "номер телефона", "card": "номер карты", "ru_passport": "паспорт",
                     "secret": "ключ API"},
        ("Ночная выгрузка завершилась поздно, потому что синхронизация склада шла медленно.",
         "Изменения дашборда обсудим на встрече в четверг."),
        ("привет, выгрузка опять зависла", "смотрю", "спасибо, закрываю тикет"),
        "Здравствуйте, {v}!", "С уважением,", "Обновление учётной записи",
        ("ноль", "один", "два", "три", "четыре", "пять", "шесть", "семь", "восемь", "девять"),
        (" собака ", " точка ")),
}
