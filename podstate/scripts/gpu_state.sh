#!/bin/sh
# Defines gpu_state, which the probe runs once, beside the rest of it:
# gpu_state FIELDS CACHE IDLE_MIB APPS prints nothing without nvidia-smi (a CPU pod), else:
#   gpu.query STATUS OUTPUT   nvidia-smi --query-gpu=FIELDS (csv, no header, no units);
#                             OUTPUT by enc (gpu_end). A field it says "is not a valid field to query"
#                             (another release's name) is asked again without.
#   gpu.unknown F1,F2         the fields asked again without, if any
#   gpu.apps STATUS OUTPUT    nvidia-smi --query-compute-apps=APPS, by enc: only when a GPU
#                             has more than IDLE_MIB of memory.used, or it is unknown (a
#                             CUDA context takes more, so a GPU below it runs no process)
#   gpu.header HEADER         plain nvidia-smi's first 5 lines (the CUDA version), by b64
#   topo MATRIX               nvidia-smi topo -m, by b64
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
# gpu_cell LINE NAME: sets v to LINE's cell (of a query of the fields $f) for field NAME,
# '' when it was not asked
gpu_cell() {
    v='' y=,$f,
    case $y in *,"$2",*) ;; *) return 0 ;; esac
    y=${y%%,"$2",*}
    l=$1
    while [ -n "$y" ]; do
        y=${y#,}
        case $y in *,*) y=,${y#*,} ;; *) y='' ;; esac
        l=${l#*, }
    done
    v=${l%%,*}
}

# gpu_put LINE VALUE: prints LINE, then "+" and each line of VALUE (one at least)
gpu_put() {
    echo "$1"
    y="$2
"
    while [ -n "$y" ]; do
        printf '+%s\n' "${y%%"
"*}"
        y=${y#*"
"}
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

gpu_state() {
    command -v nvidia-smi >/dev/null 2>&1 || return 0
    f=$1 u=''
    q=$(timeout 20 nvidia-smi --query-gpu="$f" --format=csv,noheader,nounits 2>&1)
    r=$?
    while [ "$r" = 2 ]; do
        x=${q#Field \"}
        x=${x%%\"*}
        case $q in "Field \"$x\" is not a valid field to query."*) ;; *) break ;; esac
        case ,$f, in *,"$x",*) ;; *) break ;; esac
        f=,$f,
        f=${f%%,"$x",*},${f#*,"$x",}
        f=${f#,}
        f=${f%,}
        u=$u,$x
        q=$(timeout 20 nvidia-smi --query-gpu="$f" --format=csv,noheader,nounits 2>&1)
        r=$?
    done
    gpu_put "gpu.query $r" "$q"
    [ -z "$u" ] || echo "gpu.unknown ${u#,}"
    [ "$r" = 0 ] || return 0
    x=$q
    while [ -n "$x" ]; do
        gpu_cell "${x%%"
"*}" memory.used
        case $x in *"
"*) x=${x#*"
"} ;; *) x='' ;; esac
        case $v in '' | *[!0-9]*) ;; *) [ "$v" -gt "$3" ] || continue ;; esac
        a=$(timeout 20 nvidia-smi --query-compute-apps="$4" --format=csv,noheader,nounits 2>&1)
        gpu_put "gpu.apps $?" "$a"
        break
    done
    # The key: how many GPUs (lines) and the first one's driver_version (its place in $f).
    k=''
    case ,$f, in *,driver_version,*)
        n=0 x=$q
        while :; do
            n=$((n + 1))
            case $x in *"
"*) x=${x#*"
"} ;; *) break ;; esac
        done
        x=,$f,
        x=${x%%,driver_version,*}
        l=${q%%"
"*}
        while [ -n "$x" ]; do
            x=${x#,}
            case $x in *,*) x=,${x#*,} ;; *) x='' ;; esac
            l=${l#*, }
        done
        k="key $n ${l%%,*}"
        ;;
    esac
    if [ -n "$k" ] && { read -r x && [ "$x" = "$k" ] && read -r h && read -r t; } 2>/dev/null <"$2"; then
        case $h$t in "gpu.header "*"topo "*)
            echo "$h"
            echo "$t"
            return 0
            ;;
        esac
    fi
    h=$(timeout 20 nvidia-smi 2>/dev/null)
    a=$?
    t=$(timeout 20 nvidia-smi topo -m 2>/dev/null)
    b=$?
    h="gpu.header $(printf '%s\n' "$h" | head -n 5 | b64)"
    t="topo $(printf '%s\n' "$t" | b64)"
    echo "$h"
    echo "$t"
    if [ -n "$k" ] && [ "$a" = 0 ] && [ "$b" = 0 ]; then
        { printf '%s\n' "$k" "$h" "$t" >"$2"; } 2>/dev/null
    fi
    return 0
}
