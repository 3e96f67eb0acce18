"""The forms that mark where a reply's own words end, per language: attribution lines,
separators, Outlook's header block, mobile signatures and greetings. Data only, read by
outreach.conversations.quotes (which says how they are used) and listed in
docs/conversations.md, "The new part of a reply"."""

# The word an attribution starts with, when its language has one ("On", "Am", "Le", ...).
ATTRIBUTION_STARTS = {
    "en": ["on"],
    "de": ["am"],
    "fr": ["le"],
    "es": ["el"],
    "pt": ["em", "no dia"],
    "it": ["il", "il giorno"],
    "nl": ["op"],
    "sv": ["den", "on"],
    "no": ["den", "på"],
    "da": ["den"],
    "pl": ["w dniu", "dnia"],
    "cs": ["dne"],
    "vi": ["vào"],
}
# The verb that ends an attribution, before its colon ("wrote:", "a écrit :").
ATTRIBUTION_VERBS = {
    "en": ["wrote"],
    "de": ["schrieb"],
    "fr": ["a écrit"],
    "es": ["escribió"],
    "pt": ["escreveu"],
    "it": ["ha scritto"],
    "nl": ["schreef", "geschreven"],
    "sv": ["skrev"],
    "no": ["skrev"],
    "da": ["skrev"],
    "fi": ["kirjoitti"],
    "pl": ["napisał", "napisała", "napisał(a)", "pisze"],
    "ru": ["написал", "написала", "написал(а)", "пишет"],
    "cs": ["napsal", "napsala", "napsal(a)"],
    "tr": ["yazdı"],
    "vi": ["đã viết"],
    "ja": ["書きました", "のメール"],
    "zh": ["写道", "寫道"],
    "ko": ["작성"],
}
# Verbs that may come before the name ("Am <date> schrieb <name>:", "Op <date> schreef
# <name>:", "Den <date> skrev <name>:"): then the attribution starts with its word.
ATTRIBUTION_VERBS_BEFORE_NAME = ["schrieb", "schreef", "skrev", "sent"]

SEPARATOR_PHRASES = {
    "en": ["original message", "reply message", "forwarded message"],
    "de": [
        "ursprüngliche nachricht",
        "originalnachricht",
        "antwort nachricht",
        "weitergeleitete nachricht",
    ],
    "fr": ["message d'origine", "message original", "message transféré"],
    "es": ["mensaje original", "mensaje reenviado"],
    "pt": ["mensagem original", "mensagem encaminhada"],
    "it": ["messaggio originale", "messaggio inoltrato"],
    "nl": ["oorspronkelijk bericht", "origineel bericht", "doorgestuurd bericht"],
    "sv": ["ursprungligt meddelande", "vidarebefordrat meddelande"],
    "no": ["opprinnelig melding", "videresendt melding"],
    "da": ["oprindelig meddelelse", "videresendt meddelelse"],
    "fi": ["alkuperäinen viesti", "välitetty viesti"],
    "pl": ["wiadomość oryginalna", "oryginalna wiadomość", "przekazana wiadomość"],
    "ru": ["исходное сообщение", "пересылаемое сообщение", "пересланное сообщение"],
    "ja": ["元のメッセージ", "転送メッセージ"],
    "zh": ["原始邮件", "原始郵件", "转发的邮件", "轉寄的郵件"],
}
FORWARD_WORDS = [
    "forwarded",
    "weitergeleitete",
    "transféré",
    "reenviado",
    "encaminhada",
    "inoltrato",
    "doorgestuurd",
    "vidarebefordrat",
    "videresendt",
    "välitetty",
    "przekazana",
    "пересылаемое",
    "пересланное",
    "転送",
    "转发",
    "轉寄",
]

# Outlook's header block: a sender field, then within five lines a date field (or a
# date field first, then another field). Names per language.
HEADER_FROM_FIELDS = [
    "from", "von", "de", "da", "van", "från", "fra", "lähettäjä", "od", "от", "kimden",
    "差出人", "发件人", "發件人", "寄件者", "寄件人", "보낸 사람",
]  # fmt: skip
HEADER_DATE_FIELDS = [
    "sent", "date", "gesendet", "datum", "envoyé", "envoyé le", "enviado", "enviado el",
    "enviada", "enviado em", "enviada em", "fecha", "inviato", "inviato il", "data",
    "verzonden", "verzonden op", "verstuurd", "skickat", "sendt", "dato", "lähetetty",
    "päivämäärä", "wysłano", "wysłane", "отправлено", "дата", "odesláno", "gönderildi",
    "tarih", "送信日時", "日付", "发送时间", "發送時間", "寄件日期", "日期", "时间",
    "보낸 날짜",
]  # fmt: skip
HEADER_OTHER_FIELDS = [
    "to", "cc", "bcc", "subject", "an", "betreff", "à", "a", "objet", "para", "asunto",
    "assunto", "oggetto", "aan", "onderwerp", "till", "ämne", "til", "emne",
    "vastaanottaja", "aihe", "do", "temat", "kopia", "кому", "копия", "тема", "komu",
    "předmět", "kime", "konu", "宛先", "件名", "收件人", "收件者", "抄送", "副本", "主题",
    "主旨", "받는 사람", "제목",
]  # fmt: skip

# Mobile and webmail signatures: the whole line, a device of at most four words.
SIGNATURE_PATTERNS = {
    "separator": r"^--\s?$",
    "en": (
        r"^(sent from my|sent from|sent with|sent via|sent using|get outlook for)"
        r"( [^\s,.;:!?@]+){1,4}\.?$"
    ),
    "de": (
        r"^(von meinem( [^\s,.;:!?@]+){1,4} gesendet|gesendet von( meinem)?( [^\s,.;:!?@]+)"
        r"{1,4}|von( [^\s,.;:!?@]+){1,3} für \S+ gesendet)\.?$"
    ),
    "fr": r"^(envoyé de mon|envoyé depuis mon|envoyé depuis|envoyé à partir de)( [^\s,.;:!?@]+){1,4}\.?$",
    "es": r"^(enviado desde mi|enviado desde)( [^\s,.;:!?@]+){1,4}\.?$",
    "pt": r"^(enviado do meu|enviado do|enviado a partir do meu)( [^\s,.;:!?@]+){1,4}\.?$",
    "it": r"^(inviato dal mio|inviato da)( [^\s,.;:!?@]+){1,4}\.?$",
    "nl": r"^(verzonden vanaf mijn|verstuurd vanaf mijn|verzonden met|verzonden vanaf)( [^\s,.;:!?@]+){1,4}\.?$",
    "sv": r"^(skickat från min|skickat från)( [^\s,.;:!?@]+){1,4}\.?$",
    "no-da": r"^(sendt fra min|sendt fra)( [^\s,.;:!?@]+){1,4}\.?$",
    "fi": r"^lähetetty( [^\s,.;:!?@]+){1,4}\.?$",
    "pl": r"^(wysłane z mojego|wysłano z mojego|wysłane z|wysłano z)( [^\s,.;:!?@]+){1,4}\.?$",
    "ru": r"^(отправлено с моего|отправлено с|отправлено из)( [^\s,.;:!?@]+){1,4}\.?$",
    "ja": r"^[^\s。、]{2,20} ?から送信$",
    "zh": r"^(发自我的|從我的|从我的|發自我的) ?[^\s。，]{2,20}( ?傳送| ?发送)?$",
}

# Greetings: a cut that leaves only one of these has lost the person's words.
GREETING = (
    r"^(hi|hello|hey|dear|good (morning|afternoon|evening)|hallo|guten (morgen|tag|abend)"
    r"|liebe[rs]?|sehr geehrte[rs]?|moin|servus|bonjour|bonsoir|salut|cher|chère|madame"
    r"|monsieur|hola|buenos días|buenas tardes|buenas|estimad[oa]s?|ciao|buongiorno"
    r"|gentile|salve|hoi|beste|goedemorgen|goedemiddag|hej|hei|moi|olá|oi|bom dia|prezad[oa]"
    r"|cześć|dzień dobry|witam|здравствуйте|привет|добрый день|こんにちは|お世話になっております"
    r"|你好|您好)\b[^\n]{0,40}[,，:]$"
)

QUOTE_MARKERS = {
    "attribution": {"starts": ATTRIBUTION_STARTS, "verbs": ATTRIBUTION_VERBS},
    "separator": SEPARATOR_PHRASES,
    "header block": {
        "from": HEADER_FROM_FIELDS,
        "date": HEADER_DATE_FIELDS,
        "other": HEADER_OTHER_FIELDS,
    },
    "signature": SIGNATURE_PATTERNS,
}
