"""How every RPC is answered: authorized, run where it belongs, vnode-sync errors mapped to gRPC
status codes, and garbage on the wire refused, each in one place.

Calls that touch the durable store (every Admin call) run on the store thread; an answer they
return unencoded (`EncodeLater`) is encoded on the encoding threads, freeing the store thread
for the next call. In-memory calls (agents' reports) are answered on the event loop.
"""

import functools
import logging

import grpc
from google.protobuf.message import DecodeError

from vnode_sync.errors import InvalidArgument, NotFound, Unavailable, VNodeSyncError
from vnode_sync.security.authorization import PermissionDenied, Unauthenticated
from vnode_sync.security.identity import caller_of
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)

_STATUS_OF = [
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (VNodeSyncError, grpc.StatusCode.FAILED_PRECONDITION),
]


async def abort(context, name: str, error: VNodeSyncError):
    code = next(c for kind, c in _STATUS_OF if isinstance(error, kind))
    if not isinstance(error, (Unauthenticated, PermissionDenied)):  # those are in the audit log already
        log.info("%s refused: %s", name, error)
    await context.abort(code, str(error))


async def refuse_missing(context, request, name: str, what: str = "request") -> None:
    """A request that did not decode (None) is refused as INVALID_ARGUMENT."""
    if request is None:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{name}: not a valid {what} message")


class EncodeLater:
    """An answer read on the store thread whose encoding needs no store."""

    def encode(self) -> bytes:
        raise NotImplementedError


def store_rpc(method):
    """Authorize and run the call on the store thread (`self.store_thread`), in arrival order; an
    EncodeLater answer is then encoded on `self.encoding_threads`."""

    @functools.wraps(method)
    async def wrapper(self, request, context):
        await refuse_missing(context, request, method.__name__)
        caller_identity, peer = caller_of(context), context.peer()

        def call():
            caller = self.access.authorize(method.__name__, caller_identity, request, peer)
            return method(self, request, caller)
        try:
            answer = await self.store_thread.run(call)
        except VNodeSyncError as e:
            await abort(context, method.__name__, e)
        if isinstance(answer, EncodeLater):
            return await self.encoding_threads.run(answer.encode)
        return answer

    return wrapper


def loop_rpc(method):
    """Authorize and answer on the event loop: in-memory calls only."""

    @functools.wraps(method)
    async def wrapper(self, request, context):
        await refuse_missing(context, request, method.__name__)
        try:
            caller = self.access.authorize(method.__name__, caller_of(context), request, context.peer())
            return method(self, request, caller)
        except VNodeSyncError as e:
            await abort(context, method.__name__, e)

    return wrapper


def _decoder(message_class):
    """Garbage on the wire becomes None (refused as INVALID_ARGUMENT by the call), not a server traceback."""

    def decode(data: bytes):
        try:
            return message_class.FromString(data)
        except DecodeError:
            return None
    return decode


def service_handlers(service_name: str, servicer, raw_responses: tuple[str, ...] = ()) -> grpc.GenericRpcHandler:
    """The service's handlers; the responses of `raw_responses` go out already serialized."""
    handlers = {}
    for method in pb.DESCRIPTOR.services_by_name[service_name].methods:
        response = getattr(pb, method.output_type.name)
        make = {(False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
                (True, False): grpc.stream_unary_rpc_method_handler}[method.client_streaming, method.server_streaming]
        handlers[method.name] = make(
            getattr(servicer, method.name), request_deserializer=_decoder(getattr(pb, method.input_type.name)),
            response_serializer=bytes if method.name in raw_responses else response.SerializeToString)
    return grpc.method_handlers_generic_handler(pb.DESCRIPTOR.services_by_name[service_name].full_name, handlers)
