"""Cursor pagination for lists that grow without bound: `limit` (default 100,
max 1000) and `starting_after=<id>`, newest first, with a `Link: rel="next"`
header while more remain.

A page is one SELECT. Building and compiling it with the ORM costs more than
running it (prepared, on PostgreSQL), so the SQL of a page is kept per *shape*
and reused: a shape is a model filtered only by `column = value` conditions (the
account scope and exact filters such as `?email=`), with or without an anchor,
with a page size. The first page of a shape goes through the ORM and records its
SQL, but only after checking that the parameters the next pages will compute are
exactly the ones the ORM produced; anything else (joins, annotations, deferred
fields, other lookups, NULL or boolean values whose SQL differs by value) always
goes through the ORM.

A list that shows more than the model's columns passes `extend`: a function that adds
the same annotations every time (no per-request values; the function names the shape),
compiled with the page once and set on each object as attributes.
"""

from dataclasses import dataclass
from urllib.parse import urlencode

from django.db import connections
from django.db.models import Q
from django.db.models.expressions import Col
from django.db.models.lookups import Exact
from django.db.models.query import ModelIterable
from django.db.models.sql.where import AND
from rest_framework.pagination import BasePagination
from rest_framework.response import Response

from config.api.errors import ValidationFailed
from config.api.ids import is_uuid
from config.api.query import query_int

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def parse_limit(request, *, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    value = query_int(request, "limit")
    if value is None:
        return default
    if not 1 <= value <= maximum:
        raise ValidationFailed({"limit": [f"Must be between 1 and {maximum}."]})
    return value


class StartingAfterPagination(BasePagination):
    """Keyset pagination on (created_at, id), newest first: stable under inserts."""

    def paginate_queryset(self, queryset, request, view=None):
        """The page; a view's `page_extend` adds its annotations (see page_fetch)."""
        self.request = request
        self.limit = parse_limit(request)
        after = request.query_params.get("starting_after")
        anchor = None
        if after is not None:  # an empty value names no object either
            anchor = (
                queryset.filter(pk=after).values("created_at", "pk").first()
                if is_uuid(after)
                else None
            )
            if anchor is None:
                raise ValidationFailed({"starting_after": ["No such object in this list."]})
        page = page_fetch(queryset, anchor, self.limit + 1, getattr(view, "page_extend", None))
        self.has_more = len(page) > self.limit
        page = page[: self.limit]
        self.last_id = page[-1].pk if page else None
        return page

    def get_paginated_response(self, data):
        response = Response(data)
        if self.has_more:
            params = self.request.query_params.copy()
            params["starting_after"] = str(self.last_id)
            params["limit"] = str(self.limit)
            url = self.request.build_absolute_uri(self.request.path)
            response["Link"] = f'<{url}?{urlencode(sorted(params.items()))}>; rel="next"'
        return response

    def get_paginated_response_schema(self, schema):
        return schema

    def get_schema_operation_parameters(self, view):
        return [
            {
                "name": "limit",
                "in": "query",
                "required": False,
                "schema": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                },
            },
            {
                "name": "starting_after",
                "in": "query",
                "required": False,
                "description": "Id of the last object of the previous page.",
                "schema": {"type": "string", "format": "uuid"},
            },
        ]


# --- Pages by shape ---------------------------------------------------------------


@dataclass(frozen=True)
class _PageStatement:
    sql: str
    attnames: list[str]
    converters: list  # [(position, converters, expression)]
    extra: list[str]  # annotations after the model's columns (`extend`)
    fixed_params: list  # the annotations' own parameters, before the page's


_statements: dict[tuple, _PageStatement | None] = {}  # shape -> statement, None: ORM only
_STATEMENTS_MAX = 1024


def page_fetch(queryset, anchor: dict | None, size: int, extend=None) -> list:
    """Up to `size` objects of `queryset`, newest first, after `anchor` (a dict of
    the anchor's created_at and pk) when given, with `extend`'s annotations."""
    shape, lookups = _shape(queryset, anchor is not None, size)
    if shape is not None:
        shape += (extend,)
    statement = _statements.get(shape) if shape is not None else None
    db = queryset.db
    connection = connections[db]
    if statement is not None:
        params = statement.fixed_params + _params(lookups, queryset.model, anchor, connection)
        with connection.cursor() as cursor:
            cursor.execute(statement.sql, params)
            rows = cursor.fetchall()
        return _objects(queryset.model, db, rows, statement, connection)
    page_queryset = _keyset(extend(queryset) if extend else queryset, anchor)[:size]
    if shape is not None and shape not in _statements:
        if len(_statements) >= _STATEMENTS_MAX:
            _statements.clear()
        _statements[shape] = _statement(page_queryset, lookups, anchor, connection)
    return list(page_queryset)


def _objects(model, db, rows, statement: _PageStatement, connection) -> list:
    width = len(statement.attnames)
    objects = []
    for row in rows:
        row = _convert(row, statement, connection)
        obj = model.from_db(db, statement.attnames, row[:width])
        for name, value in zip(statement.extra, row[width:], strict=True):
            setattr(obj, name, value)
        objects.append(obj)
    return objects


def _keyset(queryset, anchor: dict | None):
    if anchor is not None:
        # `created_at <= anchor` first: the condition an index on (..., created_at) starts
        # its scan at. The OR alone is only a filter: a page deep in a large account read
        # and dropped every newer row (100,000 deep: 155-250 ms a page).
        queryset = queryset.filter(created_at__lte=anchor["created_at"]).filter(
            Q(created_at__lt=anchor["created_at"])
            | Q(created_at=anchor["created_at"], pk__lt=anchor["pk"])
        )
    return queryset.order_by("-created_at", "-pk")


def _shape(queryset, anchored: bool, size: int) -> tuple[tuple | None, list]:
    """The queryset's shape and its `column = value` lookups, or (None, []) when it
    is more than a model's own rows filtered by such conditions."""
    query = queryset.query
    if (
        queryset._iterable_class is not ModelIterable
        or queryset._prefetch_related_lookups
        or queryset._known_related_objects
        or query.select_related
        or query.annotations
        or query.extra
        or query.extra_tables
        or query.values_select
        or query.distinct
        or query.select_for_update
        or query.combinator
        or query.deferred_loading != (frozenset(), True)
        or sum(1 for alias in query.alias_map if query.alias_refcount[alias]) != 1
        or query.low_mark
        or query.high_mark is not None
        or query.where.connector != AND
        or query.where.negated
    ):
        return None, []
    lookups = []
    for child in query.where.children:
        if not isinstance(child, Exact) or type(child.lhs) is not Col:
            return None, []
        rhs = child.rhs
        # NULL and booleans compile to different SQL by value; expressions and
        # collections are not a single parameter.
        if (
            rhs is None
            or isinstance(rhs, bool | list | tuple | set | frozenset | dict)
            or hasattr(rhs, "resolve_expression")
        ):
            return None, []
        lookups.append(child)
    columns = tuple((type(child), child.lhs.alias, child.lhs.target.column) for child in lookups)
    return (queryset.model, queryset.db, columns, anchored, size), lookups


def _params(lookups, model, anchor: dict | None, connection) -> list:
    """The page's parameters, as the ORM would compile them: the filters' values in
    order, then the anchor's (created_at three times, pk)."""
    params = []
    for lookup in lookups:
        params.extend(lookup.get_db_prep_lookup(lookup.rhs, connection)[1])
    if anchor is not None:
        created_at = model._meta.get_field("created_at")
        pk = model._meta.pk
        at = created_at.get_db_prep_value(anchor["created_at"], connection, prepared=False)
        params += [at, at, at, pk.get_db_prep_value(anchor["pk"], connection, prepared=False)]
    return params


def _statement(page_queryset, lookups, anchor, connection) -> _PageStatement | None:
    """The page's compiled statement, if reusing it is provably the same as compiling
    again: same parameters, the model's own columns in order."""
    query = page_queryset.query
    if query.select_related:
        return None
    compiler = query.get_compiler(connection=connection)
    sql, compiled_params = compiler.as_sql()
    model = page_queryset.model
    compiled_params = list(compiled_params)
    page_params = _params(lookups, model, anchor, connection)
    # The annotations' parameters come first (they are in the SELECT list), the page's last.
    fixed = len(compiled_params) - len(page_params)
    if fixed < 0 or compiled_params[fixed:] != page_params:
        return None
    extra = list(query.annotation_select)
    if fixed and not extra:
        return None
    expressions = [expression for expression, _, _ in compiler.select]
    attnames = [f.attname for f in model._meta.concrete_fields]
    own = expressions[: len(attnames)]
    if [getattr(getattr(e, "target", None), "attname", None) for e in own] != attnames:
        return None
    if len(expressions) != len(attnames) + len(extra):
        return None
    converters = [
        (position, convs, expression)
        for position, (convs, expression) in compiler.get_converters(expressions).items()
    ]
    # One text per shape, a bounded set: worth preparing on PostgreSQL.
    return _PageStatement(
        sql=sql,
        attnames=attnames,
        converters=converters,
        extra=extra,
        fixed_params=compiled_params[:fixed],
    )


def _convert(row, statement: _PageStatement, connection):
    if not statement.converters:
        return row
    row = list(row)
    for position, convs, expression in statement.converters:
        value = row[position]
        for converter in convs:
            value = converter(value, expression, connection)
        row[position] = value
    return row
