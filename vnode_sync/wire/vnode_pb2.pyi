from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HeldSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HELD_SOURCE_UNSPECIFIED: _ClassVar[HeldSource]
    HELD_SOURCE_MEASURED: _ClassVar[HeldSource]
    HELD_SOURCE_ESTIMATED: _ClassVar[HeldSource]
HELD_SOURCE_UNSPECIFIED: HeldSource
HELD_SOURCE_MEASURED: HeldSource
HELD_SOURCE_ESTIMATED: HeldSource

class User(_message.Message):
    __slots__ = ("name", "uid", "priority", "active", "running_jobs", "reservation_bps", "limit_bps", "group", "jobs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_BPS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_BPS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    name: str
    uid: int
    priority: int
    active: bool
    running_jobs: int
    reservation_bps: int
    limit_bps: int
    group: str
    jobs: _containers.RepeatedCompositeFieldContainer[JobVNode]
    def __init__(self, name: _Optional[str] = ..., uid: _Optional[int] = ..., priority: _Optional[int] = ..., active: _Optional[bool] = ..., running_jobs: _Optional[int] = ..., reservation_bps: _Optional[int] = ..., limit_bps: _Optional[int] = ..., group: _Optional[str] = ..., jobs: _Optional[_Iterable[_Union[JobVNode, _Mapping]]] = ...) -> None: ...

class JobVNode(_message.Message):
    __slots__ = ("job_id", "node", "vnode", "fallback")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    VNODE_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    node: str
    vnode: str
    fallback: str
    def __init__(self, job_id: _Optional[str] = ..., node: _Optional[str] = ..., vnode: _Optional[str] = ..., fallback: _Optional[str] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("name", "major", "minor", "read_bps", "write_bps", "read_iops", "write_iops")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAJOR_FIELD_NUMBER: _ClassVar[int]
    MINOR_FIELD_NUMBER: _ClassVar[int]
    READ_BPS_FIELD_NUMBER: _ClassVar[int]
    WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    READ_IOPS_FIELD_NUMBER: _ClassVar[int]
    WRITE_IOPS_FIELD_NUMBER: _ClassVar[int]
    name: str
    major: int
    minor: int
    read_bps: int
    write_bps: int
    read_iops: int
    write_iops: int
    def __init__(self, name: _Optional[str] = ..., major: _Optional[int] = ..., minor: _Optional[int] = ..., read_bps: _Optional[int] = ..., write_bps: _Optional[int] = ..., read_iops: _Optional[int] = ..., write_iops: _Optional[int] = ...) -> None: ...

class StorageNode(_message.Message):
    __slots__ = ("node_id", "devices", "backend", "applied_generation", "last_seen_unix", "connected", "limitations", "errors", "allocation_updates", "not_enforcing", "degraded")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    APPLIED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_UNIX_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    LIMITATIONS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_UPDATES_FIELD_NUMBER: _ClassVar[int]
    NOT_ENFORCING_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    backend: str
    applied_generation: int
    last_seen_unix: float
    connected: bool
    limitations: _containers.RepeatedScalarFieldContainer[str]
    errors: _containers.RepeatedScalarFieldContainer[str]
    allocation_updates: int
    not_enforcing: str
    degraded: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_id: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., backend: _Optional[str] = ..., applied_generation: _Optional[int] = ..., last_seen_unix: _Optional[float] = ..., connected: _Optional[bool] = ..., limitations: _Optional[_Iterable[str]] = ..., errors: _Optional[_Iterable[str]] = ..., allocation_updates: _Optional[int] = ..., not_enforcing: _Optional[str] = ..., degraded: _Optional[_Iterable[str]] = ...) -> None: ...

class Share(_message.Message):
    __slots__ = ("weight", "floor_bps", "ceiling_bps", "ceiling_iops")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    FLOOR_BPS_FIELD_NUMBER: _ClassVar[int]
    CEILING_BPS_FIELD_NUMBER: _ClassVar[int]
    CEILING_IOPS_FIELD_NUMBER: _ClassVar[int]
    weight: float
    floor_bps: int
    ceiling_bps: int
    ceiling_iops: int
    def __init__(self, weight: _Optional[float] = ..., floor_bps: _Optional[int] = ..., ceiling_bps: _Optional[int] = ..., ceiling_iops: _Optional[int] = ...) -> None: ...

class ResourceShare(_message.Message):
    __slots__ = ("device", "read", "write")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    device: str
    read: Share
    write: Share
    def __init__(self, device: _Optional[str] = ..., read: _Optional[_Union[Share, _Mapping]] = ..., write: _Optional[_Union[Share, _Mapping]] = ...) -> None: ...

class VNodeSpec(_message.Message):
    __slots__ = ("user", "uid", "priority", "shares", "job", "job_user")
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SHARES_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOB_USER_FIELD_NUMBER: _ClassVar[int]
    user: str
    uid: int
    priority: int
    shares: _containers.RepeatedCompositeFieldContainer[ResourceShare]
    job: str
    job_user: str
    def __init__(self, user: _Optional[str] = ..., uid: _Optional[int] = ..., priority: _Optional[int] = ..., shares: _Optional[_Iterable[_Union[ResourceShare, _Mapping]]] = ..., job: _Optional[str] = ..., job_user: _Optional[str] = ...) -> None: ...

class ConnectionOwner(_message.Message):
    __slots__ = ("client_address", "client_port", "user", "server_address", "server_port", "job", "vnode")
    CLIENT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_PORT_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SERVER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SERVER_PORT_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    VNODE_FIELD_NUMBER: _ClassVar[int]
    client_address: str
    client_port: int
    user: str
    server_address: str
    server_port: int
    job: str
    vnode: str
    def __init__(self, client_address: _Optional[str] = ..., client_port: _Optional[int] = ..., user: _Optional[str] = ..., server_address: _Optional[str] = ..., server_port: _Optional[int] = ..., job: _Optional[str] = ..., vnode: _Optional[str] = ...) -> None: ...

class DesiredState(_message.Message):
    __slots__ = ("generation", "node_id", "vnodes", "default_vnode", "users", "connections", "store_id", "allocation", "devices", "sharing")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    VNODES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_VNODE_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    SHARING_FIELD_NUMBER: _ClassVar[int]
    generation: int
    node_id: str
    vnodes: _containers.RepeatedCompositeFieldContainer[VNodeSpec]
    default_vnode: VNodeSpec
    users: _containers.RepeatedCompositeFieldContainer[User]
    connections: _containers.RepeatedCompositeFieldContainer[ConnectionOwner]
    store_id: int
    allocation: Allocation
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    sharing: str
    def __init__(self, generation: _Optional[int] = ..., node_id: _Optional[str] = ..., vnodes: _Optional[_Iterable[_Union[VNodeSpec, _Mapping]]] = ..., default_vnode: _Optional[_Union[VNodeSpec, _Mapping]] = ..., users: _Optional[_Iterable[_Union[User, _Mapping]]] = ..., connections: _Optional[_Iterable[_Union[ConnectionOwner, _Mapping]]] = ..., store_id: _Optional[int] = ..., allocation: _Optional[_Union[Allocation, _Mapping]] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., sharing: _Optional[str] = ...) -> None: ...

class Allocation(_message.Message):
    __slots__ = ("sequence", "fallback_seconds", "shares")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SHARES_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    fallback_seconds: float
    shares: ShareTable
    def __init__(self, sequence: _Optional[int] = ..., fallback_seconds: _Optional[float] = ..., shares: _Optional[_Union[ShareTable, _Mapping]] = ...) -> None: ...

class ShareTable(_message.Message):
    __slots__ = ("users", "devices", "read_weights", "write_weights", "read_ceilings_bps", "write_ceilings_bps")
    USERS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    READ_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    WRITE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    READ_CEILINGS_BPS_FIELD_NUMBER: _ClassVar[int]
    WRITE_CEILINGS_BPS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[str]
    read_weights: _containers.RepeatedScalarFieldContainer[float]
    write_weights: _containers.RepeatedScalarFieldContainer[float]
    read_ceilings_bps: _containers.RepeatedScalarFieldContainer[int]
    write_ceilings_bps: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, users: _Optional[_Iterable[str]] = ..., devices: _Optional[_Iterable[str]] = ..., read_weights: _Optional[_Iterable[float]] = ..., write_weights: _Optional[_Iterable[float]] = ..., read_ceilings_bps: _Optional[_Iterable[int]] = ..., write_ceilings_bps: _Optional[_Iterable[int]] = ...) -> None: ...

class SetPriorityRequest(_message.Message):
    __slots__ = ("user", "priority")
    USER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    user: str
    priority: int
    def __init__(self, user: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...

class AddUserRequest(_message.Message):
    __slots__ = ("user", "uid", "priority", "active")
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    user: str
    uid: int
    priority: int
    active: bool
    def __init__(self, user: _Optional[str] = ..., uid: _Optional[int] = ..., priority: _Optional[int] = ..., active: _Optional[bool] = ...) -> None: ...

class UserRequest(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: str
    def __init__(self, user: _Optional[str] = ...) -> None: ...

class SetActiveRequest(_message.Message):
    __slots__ = ("user", "active")
    USER_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    user: str
    active: bool
    def __init__(self, user: _Optional[str] = ..., active: _Optional[bool] = ...) -> None: ...

class SetRateRequest(_message.Message):
    __slots__ = ("user", "bps")
    USER_FIELD_NUMBER: _ClassVar[int]
    BPS_FIELD_NUMBER: _ClassVar[int]
    user: str
    bps: int
    def __init__(self, user: _Optional[str] = ..., bps: _Optional[int] = ...) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListUsersResponse(_message.Message):
    __slots__ = ("users", "generation")
    USERS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[User]
    generation: int
    def __init__(self, users: _Optional[_Iterable[_Union[User, _Mapping]]] = ..., generation: _Optional[int] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StorageNodeSpec(_message.Message):
    __slots__ = ("node_id", "devices", "endpoints")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    endpoints: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_id: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., endpoints: _Optional[_Iterable[str]] = ...) -> None: ...

class SetStorageNodeRequest(_message.Message):
    __slots__ = ("node_id", "devices", "remove_devices", "endpoints", "replace_endpoints")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_DEVICES_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    remove_devices: _containers.RepeatedScalarFieldContainer[str]
    endpoints: _containers.RepeatedScalarFieldContainer[str]
    replace_endpoints: bool
    def __init__(self, node_id: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., remove_devices: _Optional[_Iterable[str]] = ..., endpoints: _Optional[_Iterable[str]] = ..., replace_endpoints: _Optional[bool] = ...) -> None: ...

class StorageNodeRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class StorageNodeChange(_message.Message):
    __slots__ = ("node", "generation", "pending")
    NODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    node: StorageNode
    generation: int
    pending: str
    def __init__(self, node: _Optional[_Union[StorageNode, _Mapping]] = ..., generation: _Optional[int] = ..., pending: _Optional[str] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes", "generation")
    NODES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[StorageNode]
    generation: int
    def __init__(self, nodes: _Optional[_Iterable[_Union[StorageNode, _Mapping]]] = ..., generation: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("max_entries", "user", "node", "summarise")
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SUMMARISE_FIELD_NUMBER: _ClassVar[int]
    max_entries: int
    user: str
    node: str
    summarise: bool
    def __init__(self, max_entries: _Optional[int] = ..., user: _Optional[str] = ..., node: _Optional[str] = ..., summarise: _Optional[bool] = ...) -> None: ...

class RemoveUserResponse(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: str
    def __init__(self, user: _Optional[str] = ...) -> None: ...

class UserNodeStatus(_message.Message):
    __slots__ = ("node_id", "target_read_bps", "target_write_bps", "measured_read_bps", "measured_write_bps", "applied_generation", "held_at_limit", "allocated_read_bps", "allocated_write_bps", "demand_read_bps", "demand_write_bps", "weight_read_share", "weight_write_share")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_READ_BPS_FIELD_NUMBER: _ClassVar[int]
    TARGET_WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_READ_BPS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    HELD_AT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_READ_BPS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    DEMAND_READ_BPS_FIELD_NUMBER: _ClassVar[int]
    DEMAND_WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_READ_SHARE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_WRITE_SHARE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    target_read_bps: int
    target_write_bps: int
    measured_read_bps: float
    measured_write_bps: float
    applied_generation: int
    held_at_limit: bool
    allocated_read_bps: int
    allocated_write_bps: int
    demand_read_bps: float
    demand_write_bps: float
    weight_read_share: float
    weight_write_share: float
    def __init__(self, node_id: _Optional[str] = ..., target_read_bps: _Optional[int] = ..., target_write_bps: _Optional[int] = ..., measured_read_bps: _Optional[float] = ..., measured_write_bps: _Optional[float] = ..., applied_generation: _Optional[int] = ..., held_at_limit: _Optional[bool] = ..., allocated_read_bps: _Optional[int] = ..., allocated_write_bps: _Optional[int] = ..., demand_read_bps: _Optional[float] = ..., demand_write_bps: _Optional[float] = ..., weight_read_share: _Optional[float] = ..., weight_write_share: _Optional[float] = ...) -> None: ...

class UserSummary(_message.Message):
    __slots__ = ("nodes", "target_read_bps_min", "target_read_bps_max", "target_write_bps_min", "target_write_bps_max", "measured_read_bps", "measured_write_bps", "applied_generation_min", "nodes_held_at_limit")
    NODES_FIELD_NUMBER: _ClassVar[int]
    TARGET_READ_BPS_MIN_FIELD_NUMBER: _ClassVar[int]
    TARGET_READ_BPS_MAX_FIELD_NUMBER: _ClassVar[int]
    TARGET_WRITE_BPS_MIN_FIELD_NUMBER: _ClassVar[int]
    TARGET_WRITE_BPS_MAX_FIELD_NUMBER: _ClassVar[int]
    MEASURED_READ_BPS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_GENERATION_MIN_FIELD_NUMBER: _ClassVar[int]
    NODES_HELD_AT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    nodes: int
    target_read_bps_min: int
    target_read_bps_max: int
    target_write_bps_min: int
    target_write_bps_max: int
    measured_read_bps: float
    measured_write_bps: float
    applied_generation_min: int
    nodes_held_at_limit: int
    def __init__(self, nodes: _Optional[int] = ..., target_read_bps_min: _Optional[int] = ..., target_read_bps_max: _Optional[int] = ..., target_write_bps_min: _Optional[int] = ..., target_write_bps_max: _Optional[int] = ..., measured_read_bps: _Optional[float] = ..., measured_write_bps: _Optional[float] = ..., applied_generation_min: _Optional[int] = ..., nodes_held_at_limit: _Optional[int] = ...) -> None: ...

class UserStatus(_message.Message):
    __slots__ = ("user", "nodes", "summary")
    USER_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    user: User
    nodes: _containers.RepeatedCompositeFieldContainer[UserNodeStatus]
    summary: UserSummary
    def __init__(self, user: _Optional[_Union[User, _Mapping]] = ..., nodes: _Optional[_Iterable[_Union[UserNodeStatus, _Mapping]]] = ..., summary: _Optional[_Union[UserSummary, _Mapping]] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("generation", "users", "nodes", "sharing", "groups")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    SHARING_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    generation: int
    users: _containers.RepeatedCompositeFieldContainer[UserStatus]
    nodes: _containers.RepeatedCompositeFieldContainer[StorageNode]
    sharing: str
    groups: _containers.RepeatedCompositeFieldContainer[GroupStatus]
    def __init__(self, generation: _Optional[int] = ..., users: _Optional[_Iterable[_Union[UserStatus, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[StorageNode, _Mapping]]] = ..., sharing: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[GroupStatus, _Mapping]]] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ("name", "weight", "parent", "floor_bps", "ceiling_bps", "users")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    FLOOR_BPS_FIELD_NUMBER: _ClassVar[int]
    CEILING_BPS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: int
    parent: str
    floor_bps: int
    ceiling_bps: int
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[int] = ..., parent: _Optional[str] = ..., floor_bps: _Optional[int] = ..., ceiling_bps: _Optional[int] = ..., users: _Optional[_Iterable[str]] = ...) -> None: ...

class AddGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: Group
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ...) -> None: ...

class SetGroupRequest(_message.Message):
    __slots__ = ("name", "weight", "parent", "floor_bps", "ceiling_bps")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    FLOOR_BPS_FIELD_NUMBER: _ClassVar[int]
    CEILING_BPS_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: int
    parent: str
    floor_bps: int
    ceiling_bps: int
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[int] = ..., parent: _Optional[str] = ..., floor_bps: _Optional[int] = ..., ceiling_bps: _Optional[int] = ...) -> None: ...

class GroupRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class MoveUserRequest(_message.Message):
    __slots__ = ("user", "group")
    USER_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    user: str
    group: str
    def __init__(self, user: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups", "generation")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    generation: int
    def __init__(self, groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ..., generation: _Optional[int] = ...) -> None: ...

class GroupStatus(_message.Message):
    __slots__ = ("group", "active_users", "measured_read_bps", "measured_write_bps", "given_read_bps", "given_write_bps")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_USERS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_READ_BPS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    GIVEN_READ_BPS_FIELD_NUMBER: _ClassVar[int]
    GIVEN_WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    group: Group
    active_users: int
    measured_read_bps: float
    measured_write_bps: float
    given_read_bps: float
    given_write_bps: float
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ..., active_users: _Optional[int] = ..., measured_read_bps: _Optional[float] = ..., measured_write_bps: _Optional[float] = ..., given_read_bps: _Optional[float] = ..., given_write_bps: _Optional[float] = ...) -> None: ...

class JobRequest(_message.Message):
    __slots__ = ("job_id", "user", "uid", "node", "account", "queue", "requested_priority", "reservation_bps", "limit_bps")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_BPS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_BPS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    user: str
    uid: int
    node: str
    account: str
    queue: str
    requested_priority: int
    reservation_bps: int
    limit_bps: int
    def __init__(self, job_id: _Optional[str] = ..., user: _Optional[str] = ..., uid: _Optional[int] = ..., node: _Optional[str] = ..., account: _Optional[str] = ..., queue: _Optional[str] = ..., requested_priority: _Optional[int] = ..., reservation_bps: _Optional[int] = ..., limit_bps: _Optional[int] = ...) -> None: ...

class JobResponse(_message.Message):
    __slots__ = ("user", "effective_priority", "generation")
    USER_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    user: User
    effective_priority: int
    generation: int
    def __init__(self, user: _Optional[_Union[User, _Mapping]] = ..., effective_priority: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class RunningJobsRequest(_message.Message):
    __slots__ = ("source", "job_ids")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    source: str
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, source: _Optional[str] = ..., job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RunningJobsResponse(_message.Message):
    __slots__ = ("expired_job_ids",)
    EXPIRED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    expired_job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, expired_job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class PressureRequest(_message.Message):
    __slots__ = ("window_seconds", "limit")
    WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    window_seconds: float
    limit: int
    def __init__(self, window_seconds: _Optional[float] = ..., limit: _Optional[int] = ...) -> None: ...

class NodePressure(_message.Message):
    __slots__ = ("node_id", "read_bps", "write_bps", "allowed_read_bps", "allowed_write_bps", "held_at_limit", "held_since_unix", "held_seconds", "held_source")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    READ_BPS_FIELD_NUMBER: _ClassVar[int]
    WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_READ_BPS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    HELD_AT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    HELD_SINCE_UNIX_FIELD_NUMBER: _ClassVar[int]
    HELD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    HELD_SOURCE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    read_bps: float
    write_bps: float
    allowed_read_bps: int
    allowed_write_bps: int
    held_at_limit: bool
    held_since_unix: float
    held_seconds: float
    held_source: HeldSource
    def __init__(self, node_id: _Optional[str] = ..., read_bps: _Optional[float] = ..., write_bps: _Optional[float] = ..., allowed_read_bps: _Optional[int] = ..., allowed_write_bps: _Optional[int] = ..., held_at_limit: _Optional[bool] = ..., held_since_unix: _Optional[float] = ..., held_seconds: _Optional[float] = ..., held_source: _Optional[_Union[HeldSource, str]] = ...) -> None: ...

class UserPressure(_message.Message):
    __slots__ = ("user", "priority", "pressure", "held_seconds", "nodes_held", "nodes", "job", "group")
    USER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PRESSURE_FIELD_NUMBER: _ClassVar[int]
    HELD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NODES_HELD_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    user: str
    priority: int
    pressure: float
    held_seconds: float
    nodes_held: int
    nodes: _containers.RepeatedCompositeFieldContainer[NodePressure]
    job: str
    group: str
    def __init__(self, user: _Optional[str] = ..., priority: _Optional[int] = ..., pressure: _Optional[float] = ..., held_seconds: _Optional[float] = ..., nodes_held: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodePressure, _Mapping]]] = ..., job: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class PressureResponse(_message.Message):
    __slots__ = ("generation", "sharing", "window_seconds", "covered_seconds", "users", "sampled_at_unix")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SHARING_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    COVERED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_AT_UNIX_FIELD_NUMBER: _ClassVar[int]
    generation: int
    sharing: str
    window_seconds: float
    covered_seconds: float
    users: _containers.RepeatedCompositeFieldContainer[UserPressure]
    sampled_at_unix: float
    def __init__(self, generation: _Optional[int] = ..., sharing: _Optional[str] = ..., window_seconds: _Optional[float] = ..., covered_seconds: _Optional[float] = ..., users: _Optional[_Iterable[_Union[UserPressure, _Mapping]]] = ..., sampled_at_unix: _Optional[float] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("node_id", "devices", "backend", "limitations", "shares_by_weight", "shares_per_node")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    LIMITATIONS_FIELD_NUMBER: _ClassVar[int]
    SHARES_BY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SHARES_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    backend: str
    limitations: _containers.RepeatedScalarFieldContainer[str]
    shares_by_weight: bool
    shares_per_node: bool
    def __init__(self, node_id: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., backend: _Optional[str] = ..., limitations: _Optional[_Iterable[str]] = ..., shares_by_weight: _Optional[bool] = ..., shares_per_node: _Optional[bool] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("generation", "stream_port")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    STREAM_PORT_FIELD_NUMBER: _ClassVar[int]
    generation: int
    stream_port: int
    def __init__(self, generation: _Optional[int] = ..., stream_port: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("node_id", "known_generation")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    KNOWN_GENERATION_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    known_generation: int
    def __init__(self, node_id: _Optional[str] = ..., known_generation: _Optional[int] = ...) -> None: ...

class HeldTime(_message.Message):
    __slots__ = ("user", "held_seconds", "source")
    USER_FIELD_NUMBER: _ClassVar[int]
    HELD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    user: str
    held_seconds: float
    source: HeldSource
    def __init__(self, user: _Optional[str] = ..., held_seconds: _Optional[float] = ..., source: _Optional[_Union[HeldSource, str]] = ...) -> None: ...

class DemandSummary(_message.Message):
    __slots__ = ("full", "users", "devices", "user_index", "device_index", "read_bps", "write_bps", "read_held", "write_held", "read_demand_bps", "write_demand_bps", "gone")
    FULL_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    USER_INDEX_FIELD_NUMBER: _ClassVar[int]
    DEVICE_INDEX_FIELD_NUMBER: _ClassVar[int]
    READ_BPS_FIELD_NUMBER: _ClassVar[int]
    WRITE_BPS_FIELD_NUMBER: _ClassVar[int]
    READ_HELD_FIELD_NUMBER: _ClassVar[int]
    WRITE_HELD_FIELD_NUMBER: _ClassVar[int]
    READ_DEMAND_BPS_FIELD_NUMBER: _ClassVar[int]
    WRITE_DEMAND_BPS_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    full: bool
    users: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[str]
    user_index: _containers.RepeatedScalarFieldContainer[int]
    device_index: _containers.RepeatedScalarFieldContainer[int]
    read_bps: _containers.RepeatedScalarFieldContainer[float]
    write_bps: _containers.RepeatedScalarFieldContainer[float]
    read_held: _containers.RepeatedScalarFieldContainer[bool]
    write_held: _containers.RepeatedScalarFieldContainer[bool]
    read_demand_bps: _containers.RepeatedScalarFieldContainer[float]
    write_demand_bps: _containers.RepeatedScalarFieldContainer[float]
    gone: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, full: _Optional[bool] = ..., users: _Optional[_Iterable[str]] = ..., devices: _Optional[_Iterable[str]] = ..., user_index: _Optional[_Iterable[int]] = ..., device_index: _Optional[_Iterable[int]] = ..., read_bps: _Optional[_Iterable[float]] = ..., write_bps: _Optional[_Iterable[float]] = ..., read_held: _Optional[_Iterable[bool]] = ..., write_held: _Optional[_Iterable[bool]] = ..., read_demand_bps: _Optional[_Iterable[float]] = ..., write_demand_bps: _Optional[_Iterable[float]] = ..., gone: _Optional[_Iterable[str]] = ...) -> None: ...

class UsageReport(_message.Message):
    __slots__ = ("node_id", "applied_generation", "sampled_at_unix", "errors", "held", "not_enforcing", "demand", "measured_allocation", "degraded")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    APPLIED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_AT_UNIX_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    NOT_ENFORCING_FIELD_NUMBER: _ClassVar[int]
    DEMAND_FIELD_NUMBER: _ClassVar[int]
    MEASURED_ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    applied_generation: int
    sampled_at_unix: float
    errors: _containers.RepeatedScalarFieldContainer[str]
    held: _containers.RepeatedCompositeFieldContainer[HeldTime]
    not_enforcing: str
    demand: DemandSummary
    measured_allocation: int
    degraded: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_id: _Optional[str] = ..., applied_generation: _Optional[int] = ..., sampled_at_unix: _Optional[float] = ..., errors: _Optional[_Iterable[str]] = ..., held: _Optional[_Iterable[_Union[HeldTime, _Mapping]]] = ..., not_enforcing: _Optional[str] = ..., demand: _Optional[_Union[DemandSummary, _Mapping]] = ..., measured_allocation: _Optional[int] = ..., degraded: _Optional[_Iterable[str]] = ...) -> None: ...

class ReportAck(_message.Message):
    __slots__ = ("generation",)
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    generation: int
    def __init__(self, generation: _Optional[int] = ...) -> None: ...

class ConnectionReport(_message.Message):
    __slots__ = ("reporter", "connections")
    REPORTER_FIELD_NUMBER: _ClassVar[int]
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    reporter: str
    connections: _containers.RepeatedCompositeFieldContainer[ConnectionOwner]
    def __init__(self, reporter: _Optional[str] = ..., connections: _Optional[_Iterable[_Union[ConnectionOwner, _Mapping]]] = ...) -> None: ...

class FanOutState(_message.Message):
    __slots__ = ("node_id", "message")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    message: bytes
    def __init__(self, node_id: _Optional[str] = ..., message: _Optional[bytes] = ...) -> None: ...

class FanOutNodes(_message.Message):
    __slots__ = ("node_ids",)
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class FanOutBatch(_message.Message):
    __slots__ = ("states", "generation", "nodes", "gate")
    STATES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    GATE_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedCompositeFieldContainer[FanOutState]
    generation: int
    nodes: FanOutNodes
    gate: FanOutGate
    def __init__(self, states: _Optional[_Iterable[_Union[FanOutState, _Mapping]]] = ..., generation: _Optional[int] = ..., nodes: _Optional[_Union[FanOutNodes, _Mapping]] = ..., gate: _Optional[_Union[FanOutGate, _Mapping]] = ...) -> None: ...

class FanOutGate(_message.Message):
    __slots__ = ("closed", "learn_seconds")
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    LEARN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    closed: bool
    learn_seconds: float
    def __init__(self, closed: _Optional[bool] = ..., learn_seconds: _Optional[float] = ...) -> None: ...

class FanOutEvent(_message.Message):
    __slots__ = ("port", "opened", "closed", "reports")
    PORT_FIELD_NUMBER: _ClassVar[int]
    OPENED_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    port: int
    opened: str
    closed: str
    reports: _containers.RepeatedCompositeFieldContainer[UsageReport]
    def __init__(self, port: _Optional[int] = ..., opened: _Optional[str] = ..., closed: _Optional[str] = ..., reports: _Optional[_Iterable[_Union[UsageReport, _Mapping]]] = ...) -> None: ...
