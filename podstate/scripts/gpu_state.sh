#!/bin/sh
# Defines gpu_state, which the probe runs once, beside the rest of it:
# gpu_state FIELDS CACHE IDLE_MIB APPS
# Prints (stdout, one line each):
#   gpu.query STATUS OUTPUT   nvidia-smi --query-gpu=FIELDS (csv, no header, no units);
#                             OUTPUT by enc (gpu_end). A field it says "is not a valid
#                             field to query" (another release's name) is asked again without
#   gpu.unknown F1,F2         the fields asked again without, if any
#   gpu.apps STATUS OUTPUT    nvidia-smi --query-compute-apps=APPS, by enc: only when a GPU
#                             has more than IDLE_MIB of memory.used, or it is unknown (a
#                             CUDA context takes more, so a GPU below it runs no process)
#   gpu.header HEADER         plain nvidia-smi's first 5 lines (the CUDA version), by b64
#   topo MATRIX               nvidia-smi topo -m, by b64
#   (nothing)                 without nvidia-smi (a CPU pod)
# Returns:
#   gpu_cached 1              CACHE holds no reading for the query's key
# The last two only when the query succeeded: an nvidia-smi that fails (a driver update, a
# hung GPU) is asked nothing more. They cannot change while the container runs, so they are
# kept in CACHE (on the container disk, which a restart wipes) under a key of the GPU count
# and the driver version, and read from there while the query still answers with that key:
# one nvidia-smi call per probe. Only two readings that both succeeded are kept; writing
# CACHE is the probe's only change to the pod, and one that cannot be made (a non-root
# user) only costs the two calls again next time. Every call is limited to 20 s.
# gpu_state runs beside the rest, in a subshell of its own: it sends the query's and the
# apps' OUTPUT as the line "gpu.query STATUS" then one "+LINE" for each of its lines, and
# gpu_end, in the shell that reads them, puts them back into the lines above by enc (whose
# spool is that shell's). Needs enc and b64 (scripts/enc.sh).
# shellcheck disable=SC2154 # enc_v is set by enc (scripts/enc.sh)
nl='
'

# gpu_cell LINE NAME: sets cell to LINE's cell (of a query of the fields $fields) for field
# NAME, '' when it was not asked
gpu_cell() {
    cell='' before=,$fields,
    case $before in *,"$2",*) ;; *) return 0 ;; esac
    before=${before%%,"$2",*}
    rest=$1
    while [ -n "$before" ]; do
        before=${before#,}
        case $before in *,*) before=,${before#*,} ;; *) before='' ;; esac
        rest=${rest#*, }
    done
    cell=${rest%%,*}
}

# gpu_put LINE VALUE: prints LINE, then "+" and each line of VALUE (one at least)
gpu_put() {
    echo "$1"
    rest="$2$nl"
    while [ -n "$rest" ]; do
        printf '+%s\n' "${rest%%"$nl"*}"
        rest=${rest#*"$nl"}
    done
}

# gpu_end: copies out gpu_state's lines from its stdin, each "+" line back in the value of
# the line before them, by enc
gpu_end() {
    gpu_k='' gpu_v=''
    while IFS= read -r g; do
        case $g in +*)
            gpu_v="$gpu_v${g#+}
"
            continue
            ;;
        esac
        gpu_flush
        case $g in "gpu.query "* | "gpu.apps "*) gpu_k=$g ;; *) printf '%s\n' "$g" ;; esac
    done
    gpu_flush
}

# gpu_flush: prints the line gpu_end holds (gpu_k), its value (gpu_v) by enc
gpu_flush() {
    if [ -n "$gpu_k" ]; then
        enc "${gpu_v%"
"}"
        printf '%s %s\n' "$gpu_k" "$enc_v"
    fi
    gpu_k='' gpu_v=''
}

# gpu_query FIELDS: sets answer and status to nvidia-smi's to a query of FIELDS, fields to
# those last asked, and unknown to ",F1,F2": those it did not know, asked again without
gpu_query() {
    fields=$1 unknown=''
    answer=$(timeout 20 nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits 2>&1)
    status=$?
    while [ "$status" = 2 ]; do
        field=${answer#Field \"}
        field=${field%%\"*}
        case $answer in "Field \"$field\" is not a valid field to query."*) ;; *) break ;; esac
        case ,$fields, in *,"$field",*) ;; *) break ;; esac
        fields=,$fields,
        fields=${fields%%,"$field",*},${fields#*,"$field",}
        fields=${fields#,}
        fields=${fields%,}
        unknown=$unknown,$field
        answer=$(timeout 20 nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits 2>&1)
        status=$?
    done
}

# gpu_apps IDLE_MIB APPS: prints gpu.apps when a GPU of the query's answer has more than
# IDLE_MIB of memory.used, or it is unknown
gpu_apps() {
    rows=$answer
    while [ -n "$rows" ]; do
        gpu_cell "${rows%%"$nl"*}" memory.used
        case $rows in *"$nl"*) rows=${rows#*"$nl"} ;; *) rows='' ;; esac
        case $cell in '' | *[!0-9]*) ;; *) [ "$cell" -gt "$1" ] || continue ;; esac
        apps=$(timeout 20 nvidia-smi --query-compute-apps="$2" --format=csv,noheader,nounits 2>&1)
        gpu_put "gpu.apps $?" "$apps"
        break
    done
}

# gpu_key: sets key to the cache's key, "key COUNT DRIVER": how many GPUs (lines of the
# answer) and the first one's driver_version; '' when driver_version was not asked
gpu_key() {
    key=''
    case ,$fields, in *,driver_version,*)
        count=0 rows=$answer
        while :; do
            count=$((count + 1))
            case $rows in *"$nl"*) rows=${rows#*"$nl"} ;; *) break ;; esac
        done
        gpu_cell "${answer%%"$nl"*}" driver_version
        key="key $count $cell"
        ;;
    esac
}

# gpu_cached CACHE: prints the header and topology lines CACHE holds for key; false when
# it holds none (no key, another key, or not whole)
gpu_cached() {
    if [ -n "$key" ] && { read -r line && [ "$line" = "$key" ] && read -r header && read -r topo; } 2>/dev/null <"$1"; then
        case $header$topo in "gpu.header "*"topo "*)
            echo "$header"
            echo "$topo"
            return 0
            ;;
        esac
    fi
    return 1
}

# gpu_fresh CACHE: prints the header and topology lines from nvidia-smi, kept in CACHE
# under key when both calls succeeded
gpu_fresh() {
    header=$(timeout 20 nvidia-smi 2>/dev/null)
    header_status=$?
    topo=$(timeout 20 nvidia-smi topo -m 2>/dev/null)
    topo_status=$?
    header="gpu.header $(printf '%s\n' "$header" | head -n 5 | b64)"
    topo="topo $(printf '%s\n' "$topo" | b64)"
    echo "$header"
    echo "$topo"
    if [ -n "$key" ] && [ "$header_status" = 0 ] && [ "$topo_status" = 0 ]; then
        { printf '%s\n' "$key" "$header" "$topo" >"$1"; } 2>/dev/null
    fi
}

gpu_state() {
    command -v nvidia-smi >/dev/null 2>&1 || return 0
    gpu_query "$1"
    gpu_put "gpu.query $status" "$answer"
    [ -z "$unknown" ] || echo "gpu.unknown ${unknown#,}"
    [ "$status" = 0 ] || return 0
    gpu_apps "$3" "$4"
    gpu_key
    gpu_cached "$2" || gpu_fresh "$2"
    return 0
}
